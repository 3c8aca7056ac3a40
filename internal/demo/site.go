package demo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// maxFile bounds the size of a file the demo agent edits.
const maxFile = 1 << 20

// editableExts are the extensions of the files "replace" edits.
var editableExts = []string{".html", ".htm", ".md", ".markdown", ".css", ".txt", ".astro"}

func editable(name string) bool {
	return slices.Contains(editableExts, strings.ToLower(path.Ext(name)))
}

// site is a working tree being edited: files are read through an os.Root, edited in
// memory, and written by commit only when every edit succeeded. Not safe for concurrent use.
type site struct {
	root  *os.Root
	files map[string]*siteFile // by clean slash-separated path
	index string               // path of index.html, once found
}

type siteFile struct {
	orig, text string
	perm       fs.FileMode
	created    bool
}

func openSite(dir string) (*site, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("demo: open the site: %w", err)
	}
	return &site{root: root, files: map[string]*siteFile{}}, nil
}

func (s *site) close() { _ = s.root.Close() }

// read returns a file's current text (edits included).
func (s *site) read(name string) (string, error) {
	name, err := s.check(name)
	if err != nil {
		return "", err
	}
	if f, ok := s.files[name]; ok {
		return f.text, nil
	}
	return s.load(name)
}

func (s *site) load(name string) (string, error) {
	fi, err := s.root.Lstat(filepath.FromSlash(name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", notFound("there is no file %s", name)
	case err != nil:
		return "", err
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file: %w", name, ErrUnsafePath)
	case fi.Size() > maxFile:
		return "", fmt.Errorf("%s is larger than the demo agent edits (%d bytes)", name, maxFile)
	}
	b, err := s.root.ReadFile(filepath.FromSlash(name))
	if err != nil {
		return "", err
	}
	s.files[name] = &siteFile{orig: string(b), text: string(b), perm: fi.Mode().Perm()}
	return string(b), nil
}

// exists reports whether name is a file of the site, on disk or created by an edit.
func (s *site) exists(name string) bool {
	if _, ok := s.files[name]; ok {
		return true
	}
	_, err := s.root.Lstat(filepath.FromSlash(name))
	return err == nil
}

// write replaces the text of a file read before.
func (s *site) write(name, text string) {
	s.files[path.Clean(name)].text = text
}

// create adds a new file; it fails with ErrExists when the file is there.
func (s *site) create(name, text string) error {
	name, err := s.check(name)
	if err != nil {
		return err
	}
	if s.exists(name) {
		return fmt.Errorf("%s %w", name, ErrExists)
	}
	s.files[name] = &siteFile{text: text, perm: 0o644, created: true}
	return nil
}

// check cleans a slash-separated path and refuses one that leaves the site, is hidden (.git)
// or goes through a symbolic link.
func (s *site) check(name string) (string, error) {
	name = path.Clean(strings.ReplaceAll(name, `\`, "/"))
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", fmt.Errorf("refusing %s: %w", name, ErrUnsafePath)
	}
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ".") {
			return "", fmt.Errorf("refusing hidden path %s: %w", name, ErrUnsafePath)
		}
		if err := s.notLink(strings.Join(parts[:i+1], "/")); err != nil {
			return "", err
		}
	}
	return name, nil
}

func (s *site) notLink(name string) error {
	fi, err := s.root.Lstat(filepath.FromSlash(name))
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("refusing %s, a symbolic link: %w", name, ErrUnsafePath)
	}
	return nil
}

// textFiles lists the editable files of the site, sorted: regular files not under a hidden
// directory or node_modules, and files created by earlier edits. Symbolic links are skipped.
func (s *site) textFiles() ([]string, error) {
	var out []string
	err := fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules"):
			return fs.SkipDir
		case d.Type().IsRegular() && editable(p) && !strings.HasPrefix(d.Name(), "."):
			out = append(out, p)
		}
		return nil
	})
	for name, f := range s.files {
		if f.created && editable(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, err
}

// commit writes every file whose text changed, and returns their paths, sorted.
func (s *site) commit() ([]string, error) {
	var changed []string
	for name, f := range s.files {
		if f.text != f.orig || f.created {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	for _, name := range changed {
		if err := s.writeFile(name, s.files[name]); err != nil {
			return nil, fmt.Errorf("demo: write %s: %w", name, err)
		}
	}
	return changed, nil
}

func (s *site) writeFile(name string, f *siteFile) error {
	if dir := path.Dir(name); f.created && dir != "." {
		if err := s.root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return err
		}
	}
	return s.root.WriteFile(filepath.FromSlash(name), []byte(f.text), f.perm)
}

// indexPage returns the path of the site's home page: index.html at the top, else the
// shallowest index.html (public/index.html, site/index.html…).
func (s *site) indexPage() (string, error) {
	if s.index != "" {
		return s.index, nil
	}
	files, err := s.textFiles()
	if err != nil {
		return "", err
	}
	best := ""
	for _, f := range files {
		if path.Base(f) == "index.html" && (best == "" || depth(f) < depth(best)) {
			best = f
		}
	}
	if best == "" {
		return "", notFound("the site has no index.html")
	}
	s.index = best
	return best, nil
}

func depth(p string) int { return strings.Count(p, "/") }
