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
	if dep := e.deploy(site, src); !dep.Previous.IsZero() {
		t.Fatalf("first deploy Previous = %+v, want none", dep.Previous)
	}
	writeTree(t, src, map[string]string{"index.html": "new"})
	dep := e.deploy(site, src)
	if dep.Previous != (Ref{"t1", "1"}) || dep.Version != "2" {
		t.Fatalf("second deploy = %+v, want version 2 after 1", dep)
	}
	if other := e.deploy(Site{"acme", "t2"}, src); other.Previous != (Ref{"t1", "2"}) {
		t.Errorf("a new thread's first deploy: Previous = %+v, want the project's latest (t1 version 2)", other.Previous)
	}
	v, err := e.dir.Version(context.Background(), site, dep.Previous.Version)
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
	v2, err := e.dir.Version(context.Background(), site, "2")
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	v3, err := e.dir.Version(context.Background(), Site{"acme", "t2"}, "1")
	if err != nil {
		t.Fatal(err)
	}
	defer v3.Close()
	if v.Digest() == v2.Digest() || v2.Digest() != v3.Digest() {
		t.Errorf("digests: version 1 %s, 2 %s, t2's copy of 2 %s", v.Digest(), v2.Digest(), v3.Digest())
	}
	if _, err := e.dir.Version(context.Background(), site, "9"); !errors.Is(err, ErrNoVersion) {
		t.Errorf("version 9: %v, want ErrNoVersion", err)
	}
}
