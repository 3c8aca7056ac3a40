package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSiteFilesThePlatformReadsAreHostile: the job plants the files the platform reads
// itself before the install (package.json, .nvmrc, the lockfile) as links out of the tree,
// to a device that never ends, or as a FIFO. Each is a build error naming the file, never
// a read of the target, a hang or the target's content in the error.
func TestSiteFilesThePlatformReadsAreHostile(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "secret")
	write(t, secret, "v999.31337.0\n")
	cases := []struct {
		name  string
		plant func(dir string) error
		want  string
	}{
		{".nvmrc linked out", func(dir string) error { return os.Symlink(secret, filepath.Join(dir, ".nvmrc")) }, ".nvmrc is a symbolic link"},
		{"lockfile to /dev/zero", func(dir string) error { return os.Symlink("/dev/zero", filepath.Join(dir, "package-lock.json")) }, "package-lock.json is a symbolic link"},
		{"lockfile a fifo", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "package-lock.json"), 0o666) }, "package-lock.json is not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			write(t, filepath.Join(dir, "package.json"), `{"name":"s","version":"1.0.0","scripts":{"build":"mkdir -p dist"}}`)
			if err := c.plant(dir); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := Run(ctx, dir, Detect(dir, "", ""), Config{StateDir: t.TempDir()})
			if ctx.Err() != nil {
				t.Fatal("the build hung reading the planted file")
			}
			if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "31337") {
				t.Fatalf("build error %v; want a build error saying %q", err, c.want)
			}
		})
	}
	t.Run("package.json linked out", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		write(t, filepath.Join(dir, "pkg"), `{"engines":{"node":">=999.31337"}}`)
		if err := os.Symlink(filepath.Join(dir, "pkg"), filepath.Join(dir, "package.json")); err != nil {
			t.Fatal(err)
		}
		if p := Detect(dir, "", ""); !p.Node {
			t.Fatalf("a linked package.json makes no Node site: %+v", p)
		}
		err := CheckNode(context.Background(), dir)
		if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "package.json is a symbolic link") || strings.Contains(err.Error(), "31337") {
			t.Fatalf("check error %v", err)
		}
	})
}

// TestSeedWritesOnlyInsideTheHome: the job leaves its npm cache (in its build home) as a link
// out of the home, and a cache directory as a link to another directory; the platform's copy
// of the shared packages writes nothing outside the home.
func TestSeedWritesOnlyInsideTheHome(t *testing.T) {
	t.Parallel()
	entry, outside := t.TempDir(), t.TempDir()
	write(t, filepath.Join(entry, "content-v2", "sha512", "ab", "cd", "ef"), "package")
	write(t, filepath.Join(entry, "index-v5", "12", "34", "56"), "index")
	for name, link := range map[string]func(home string) error{
		"the cache": func(home string) error { return os.Symlink(outside, filepath.Join(home, ".npm")) },
		"a folder": func(home string) error {
			if err := os.MkdirAll(filepath.Join(home, ".npm", "_cacache"), 0o755); err != nil {
				return err
			}
			return os.Symlink(outside, filepath.Join(home, ".npm", "_cacache", "content-v2"))
		},
	} {
		home := t.TempDir()
		if err := link(home); err != nil {
			t.Fatal(err)
		}
		_ = seed(entry, home, nil) // an error is fine; a write outside is not
		if left, _ := os.ReadDir(outside); len(left) > 0 {
			t.Fatalf("%s as a link: the copy wrote %d entries outside the home", name, len(left))
		}
	}
}

// TestFillTakesOnlyRegistryPackagesFromTheLockfile: the job writes the lockfile the fill reads;
// names or versions that npm would read as options or other sources, and packages from
// elsewhere, never reach the fill's command line.
func TestFillTakesOnlyRegistryPackagesFromTheLockfile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "package-lock.json"), `{"lockfileVersion":3,"packages":{"":{"name":"s"},
"node_modules/is-number":{"version":"7.0.0","integrity":"sha512-x"},
"node_modules/a/node_modules/@scope/b":{"version":"1.2.3-beta.1","integrity":"sha512-x","resolved":"https://registry.npmjs.org/@scope/b/-/b-1.2.3-beta.1.tgz"},
"node_modules/--registry=http://evil":{"version":"1.0.0","integrity":"sha512-x"},
"node_modules/c":{"version":"1.0.0 --registry=http://evil","integrity":"sha512-x"},
"node_modules/d":{"version":"1.0.0","integrity":"sha512-x","resolved":"https://evil.example/d.tgz"},
"node_modules/e":{"version":"1.0.0","integrity":"sha512-x","resolved":"git+ssh://git@evil.example/e.git"},
"node_modules/f":{"version":"1.0.0","link":true,"resolved":"../f"},
"node_modules/g":{"name":"$(touch /tmp/x)","version":"1.0.0","integrity":"sha512-x"}}}`)
	specs, err := lockedSpecs(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "@scope/b@1.2.3-beta.1 is-number@7.0.0"; strings.Join(specs, " ") != want {
		t.Fatalf("specs %q, want %s", specs, want)
	}
}
