package preview

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"testing"
)

// TestVersionServesAPinnedVersion reads the version before the live one back: its files and
// its pages, while the thread's URL serves the new one.
func TestVersionServesAPinnedVersion(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{})
	site := Site{"acme", "t1"}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "old", "about/index.html": "about"})
	if dep := e.deploy(site, src); dep.Previous != "" {
		t.Fatalf("first deploy Previous = %q, want none", dep.Previous)
	}
	writeTree(t, src, map[string]string{"index.html": "new"})
	dep := e.deploy(site, src)
	if dep.Previous != "1" || dep.Version != "2" {
		t.Fatalf("second deploy = %+v, want version 2 after 1", dep)
	}
	v, err := e.dir.Version(context.Background(), site, dep.Previous)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if f := v.Files(); len(f) != 2 || f["index.html"].Size != 3 {
		t.Errorf("files of version 1 = %+v", f)
	}
	for path, want := range map[string]string{"/": "old", "/about/": "about"} {
		rec := httptest.NewRecorder()
		v.ServeHTTP(rec, httptest.NewRequest("GET", "http://anything"+path, nil))
		if body, _ := io.ReadAll(rec.Result().Body); string(body) != want {
			t.Errorf("version 1 %s = %d %q, want %q", path, rec.Code, body, want)
		}
	}
	if r := e.get("t1.edit.acme.localhost", "/"); r.body != "new" {
		t.Errorf("live / = %q, want new", r.body)
	}
	if _, err := e.dir.Version(context.Background(), site, "9"); !errors.Is(err, ErrNoVersion) {
		t.Errorf("version 9: %v, want ErrNoVersion", err)
	}
}
