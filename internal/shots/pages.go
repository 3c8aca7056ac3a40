package shots

import (
	"path"
	"slices"
	"strings"

	"github.com/webordinary/webordinary/internal/preview"
)

// Candidate is a page a deploy may have changed.
type Candidate struct {
	File string // the built file, e.g. "about/index.html"
	Path string // its URL path, e.g. "/about/"
	New  bool   // the previous version did not have it
}

// inert are built files that do not change how a page looks.
var inert = map[string]bool{".xml": true, ".txt": true, ".map": true, ".md": true, ".webmanifest": true}

// Pick returns the pages worth a picture, most relevant first, at most n: the HTML files
// whose content differs between before (nil: the thread's first version) and after, ranked
// by whether a changed source file names them (sources: the repository paths the job
// changed; about.astro names about/index.html), then the index, then the shallowest. When
// a file that is not HTML changed (a style sheet, a script, an image), every page may look
// different: the index is added if it is not in the list yet. 404.html is never picked.
func Pick(before, after map[string]preview.File, sources []string, n int) []Candidate {
	var pages []Candidate
	assets := false
	for f, e := range after {
		old, had := before[f]
		if had && old.SHA256 == e.SHA256 {
			continue
		}
		switch {
		case path.Base(f) == "404.html": // shown only for a missing page
		case isPage(f):
			pages = append(pages, Candidate{File: f, Path: urlPath(f), New: before != nil && !had})
		case !inert[strings.ToLower(path.Ext(f))]:
			assets = true
		}
	}
	stems := sourceStems(sources)
	slices.SortFunc(pages, func(a, b Candidate) int { return compareRelevance(a, b, stems) })
	if _, ok := after["index.html"]; assets && !slices.ContainsFunc(pages, func(c Candidate) bool { return c.File == "index.html" }) && ok {
		_, had := before["index.html"]
		pages = append(pages, Candidate{File: "index.html", Path: "/", New: before != nil && !had})
	}
	return pages[:min(len(pages), n)]
}

func isPage(f string) bool {
	ext := strings.ToLower(path.Ext(f))
	return ext == ".html" || ext == ".htm"
}

// urlPath maps a built file to the URL the preview serves it at: a/index.html is /a/.
func urlPath(f string) string {
	if f == "index.html" {
		return "/"
	}
	if dir, ok := strings.CutSuffix(f, "/index.html"); ok {
		return "/" + dir + "/"
	}
	return "/" + f
}

// pageStem is what a source file would be named for the page: "about" for about/index.html
// and about.html, "index" for the index.
func pageStem(f string) string {
	if f == "index.html" {
		return "index"
	}
	if dir, ok := strings.CutSuffix(f, "/index.html"); ok {
		return path.Base(dir)
	}
	return strings.TrimSuffix(path.Base(f), path.Ext(f))
}

// sourceStems names the pages the changed sources stand for: "about" for about.astro and for
// about/index.astro (an index is named by its folder, unless that folder holds all the
// pages), "index" for the site's own index.
func sourceStems(sources []string) map[string]bool {
	stems := map[string]bool{}
	for _, s := range sources {
		base := path.Base(s)
		stem := strings.ToLower(strings.TrimSuffix(base, path.Ext(base)))
		if dir := strings.ToLower(path.Base(path.Dir(s))); stem == "index" && !pageRoots[dir] {
			stem = dir
		}
		stems[stem] = true
	}
	return stems
}

// pageRoots are the folders site generators keep their top-level pages in: an index there is
// the site's index.
var pageRoots = map[string]bool{".": true, "/": true, "src": true, "pages": true, "app": true, "routes": true,
	"content": true, "site": true, "public": true, "docs": true, "www": true}

// compareRelevance orders named pages first, then the index, then shallow paths, then by name.
func compareRelevance(a, b Candidate, stems map[string]bool) int {
	rank := func(c Candidate) int {
		r := 0
		if stems[strings.ToLower(pageStem(c.File))] {
			r -= 2
		}
		if c.File == "index.html" {
			r--
		}
		return r
	}
	if d := rank(a) - rank(b); d != 0 {
		return d
	}
	if d := strings.Count(a.File, "/") - strings.Count(b.File, "/"); d != 0 {
		return d
	}
	return strings.Compare(a.File, b.File)
}
