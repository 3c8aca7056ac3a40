package shots_test

import (
	"image"
	"image/color"
	"image/draw"
	"reflect"
	"testing"

	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/shots"
)

func files(kv ...string) map[string]preview.File {
	m := map[string]preview.File{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = preview.File{SHA256: kv[i+1]}
	}
	return m
}

func TestPick(t *testing.T) {
	t.Parallel()
	before := files("index.html", "a", "about/index.html", "b", "blog/post.html", "c", "style.css", "d", "404.html", "e")
	cases := []struct {
		name    string
		after   map[string]preview.File
		sources []string
		n       int
		want    []string
	}{
		{"css only picks the index", files("index.html", "a", "about/index.html", "b", "style.css", "D"), nil, 3, []string{"/"}},
		{"nothing changed", before, nil, 3, nil},
		{"sitemap and 404 are not pages", files("index.html", "a", "404.html", "E", "sitemap.xml", "x"), nil, 3, nil},
		{"index, then shallow, then deep", files("index.html", "A", "about/index.html", "B", "blog/post.html", "C"), nil, 3,
			[]string{"/", "/about/", "/blog/post.html"}},
		{"a changed source names its page first", files("index.html", "A", "about/index.html", "B"), []string{"src/pages/about.astro"}, 3,
			[]string{"/about/", "/"}},
		{"an index source names its folder's page", files("index.html", "A", "about/index.html", "B"), []string{"src/pages/about/index.astro"}, 3,
			[]string{"/about/", "/"}},
		{"the site's own index source names the index", files("index.html", "A", "about/index.html", "B"), []string{"src/pages/index.astro"}, 3,
			[]string{"/", "/about/"}},
		{"at most n", files("index.html", "A", "about/index.html", "B", "blog/post.html", "C"), nil, 1, []string{"/"}},
		{"html and css: the index joins last", files("blog/post.html", "C", "style.css", "D", "index.html", "a"), nil, 3,
			[]string{"/blog/post.html", "/"}},
	}
	for _, c := range cases {
		var got []string
		for _, p := range shots.Pick(before, c.after, c.sources, c.n) {
			got = append(got, p.Path)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: picked %v, want %v", c.name, got, c.want)
		}
	}
	if got := shots.Pick(nil, files("index.html", "a"), nil, 3); len(got) != 1 || got[0].New {
		t.Errorf("nothing known before: %+v, want the index, not called new", got)
	}
	if got := shots.Pick(files("index.html", "a"), files("index.html", "a", "menu.html", "m"), nil, 3); len(got) != 1 || !got[0].New {
		t.Errorf("a page the version before lacked: %+v, want it, new", got)
	}
}

func TestDiffFindsTheChangedRegions(t *testing.T) {
	t.Parallel()
	before := image.NewRGBA(image.Rect(0, 0, 200, 300))
	draw.Draw(before, before.Bounds(), image.White, image.Point{}, draw.Src)
	after := image.NewRGBA(before.Bounds())
	draw.Draw(after, after.Bounds(), before, image.Point{}, draw.Src)
	draw.Draw(after, image.Rect(10, 10, 50, 30), &image.Uniform{color.RGBA{0, 128, 0, 255}}, image.Point{}, draw.Src)
	draw.Draw(after, image.Rect(100, 200, 120, 260), image.Black, image.Point{}, draw.Src)
	boxes, share := shots.Diff(before, after)
	want := []image.Rectangle{image.Rect(10, 10, 50, 30), image.Rect(100, 200, 120, 260)}
	if !reflect.DeepEqual(boxes, want) || share <= 0 {
		t.Errorf("boxes %v (%.3f), want %v", boxes, share, want)
	}
	if boxes, _ := shots.Diff(before, before); boxes != nil {
		t.Errorf("same picture: boxes %v", boxes)
	}
	marked := shots.Mark(after, boxes)
	if marked.At(6, 20) == after.At(6, 20) || marked.At(150, 150) != after.At(150, 150) {
		t.Error("marks are not around the boxes only")
	}
}
