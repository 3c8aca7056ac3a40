package preview_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/webordinary/webordinary/internal/preview"
)

// A worker deploys its build output; the preview server answers by Host header.
func Example() {
	root, _ := os.MkdirTemp("", "previews")
	defer os.RemoveAll(root)
	build, _ := os.MkdirTemp("", "dist")
	defer os.RemoveAll(build)
	os.WriteFile(filepath.Join(build, "index.html"), []byte("<h1>Hello</h1>"), 0o644)

	target, _ := preview.NewDir(preview.DirConfig{Root: root, Port: 4321})
	dep, err := target.Deploy(context.Background(), preview.Site{Project: "acme", Thread: "t42"}, build)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dep.URLs, dep.Version, dep.Written)

	srv, _ := preview.NewServer(preview.ServerConfig{Root: root})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	req, _ := http.NewRequest("GET", ts.URL+"/", nil)
	req.Host = "t42.edit.acme.localhost:4321"
	resp, _ := http.DefaultClient.Do(req)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// [http://t42.edit.acme.localhost:4321/ http://edit.acme.localhost:4321/] 1 1
	// 200 <h1>Hello</h1>
}
