package demo

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestCreateAstroRepo: the Astro site is committed whole (its .gitignore and lockfile
// included), and the demo agent edits its page.
func TestCreateAstroRepo(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "demo")
	bare, err := CreateAstroRepo(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	gitOut(t, dir, "clone", "-q", bare, clone)
	files := gitOut(t, clone, "ls-files")
	for _, f := range []string{".gitignore", "package.json", "package-lock.json", "astro.config.mjs", AstroPage} {
		if !strings.Contains("\n"+files+"\n", "\n"+f+"\n") {
			t.Errorf("the Astro site lacks %s: %q", f, files)
		}
	}
	summary, changed, err := Edit(clone, "Replace Rye with Wheat in "+AstroPage+".")
	if err != nil {
		t.Fatalf("edit the Astro page: %v", err)
	}
	if len(changed) != 1 || changed[0] != AstroPage || !strings.Contains(read(t, clone, AstroPage), "Special: Wheat") {
		t.Errorf("edit: %s, changed %v", summary, changed)
	}
}
