package hostile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/webordinary/webordinary/internal/hostile"
)

// A job left a link where the platform will write; the write is refused with an error the
// site's owner can act on, and nothing lands outside the tree.
func Example() {
	dir, _ := os.MkdirTemp("", "site-")
	defer os.RemoveAll(dir)
	_ = os.MkdirAll(filepath.Join(dir, "public"), 0o755)
	_ = os.Symlink("/etc/cron.d", filepath.Join(dir, "public", "attachments"))
	_ = os.WriteFile(filepath.Join(dir, ".nvmrc"), []byte("20\n"), 0o644)

	tree, err := hostile.Open(dir)
	if err != nil {
		panic(err)
	}
	defer tree.Close()
	fmt.Println(tree.MkdirAll("public/attachments", 0o755))
	nvmrc, err := tree.ReadFile(context.Background(), ".nvmrc", 64<<10)
	fmt.Printf("%q %v\n", nvmrc, err)
	// Output:
	// public/attachments is a symbolic link; the platform follows no links in a site, so replace it with the file or directory itself
	// "20\n" <nil>
}
