package shots

import (
	"image"
	"image/color"
	"image/draw"
	"testing"
)

// TestDiffMergesNearbyRegionsNotAll: more changed regions than marks are merged with their
// nearest neighbours, not all into one box spanning the page.
func TestDiffMergesNearbyRegionsNotAll(t *testing.T) {
	t.Parallel()
	before := image.NewRGBA(image.Rect(0, 0, 390, 1600))
	draw.Draw(before, before.Bounds(), image.White, image.Point{}, draw.Src)
	after := image.NewRGBA(before.Bounds())
	draw.Draw(after, after.Bounds(), before, image.Point{}, draw.Src)
	ink := &image.Uniform{color.Black}
	for i := range 5 { // a word changed in five list items at the top...
		draw.Draw(after, image.Rect(20, 20+i*40, 80, 36+i*40), ink, image.Point{}, draw.Src)
	}
	for i := range 5 { // ...and five in the footer
		draw.Draw(after, image.Rect(200, 1400+i*40, 260, 1416+i*40), ink, image.Point{}, draw.Src)
	}
	boxes, _ := Diff(before, after)
	if len(boxes) == 0 || len(boxes) > maxBoxes {
		t.Fatalf("%d boxes %v, want 1..%d", len(boxes), boxes, maxBoxes)
	}
	for _, b := range boxes {
		if b.Min.Y < 400 && b.Max.Y > 1200 {
			t.Errorf("box %v spans the top and the footer: most of it changed nothing", b)
		}
	}
}

// TestNoOutlineCoversMostOfTheView: when what changed fills most of the view (a new layout, a
// new picture), outlining it says nothing: no marks, but the crop still centres on the change.
func TestNoOutlineCoversMostOfTheView(t *testing.T) {
	t.Parallel()
	view := image.Rect(0, 0, 390, 844)
	big := []image.Rectangle{image.Rect(0, 0, 390, 600)}
	if got := outlines(big, view, Phone); got != nil {
		t.Errorf("outlines of a change filling most of the view = %v, want none", got)
	}
	small := []image.Rectangle{image.Rect(20, 20, 80, 40), image.Rect(20, 300, 200, 340)}
	if got := outlines(small, view, Phone); len(got) != 2 {
		t.Errorf("outlines of two small changes = %v, want both", got)
	}
	tall := image.Rect(0, 0, 390, 5000) // a long page: the view is the phone's screen
	if got := outlines([]image.Rectangle{image.Rect(0, 1000, 390, 1700)}, tall, Phone); got != nil {
		t.Errorf("a change filling the screen on a long page = %v, want no outline", got)
	}
}

// TestDiffOfManyScatteredChangesIsQuick: thousands of separate changes (a page whose every
// word moved) are merged to a few boxes without a pairwise search over all of them.
func TestDiffOfManyScatteredChangesIsQuick(t *testing.T) {
	t.Parallel()
	var boxes []image.Rectangle
	for y := range 60 {
		for x := range 50 {
			boxes = append(boxes, image.Rect(x*30, y*30, x*30+4, y*30+4))
		}
	}
	got := mergeNearest(boxes, maxBoxes)
	if len(got) == 0 || len(got) > maxBoxes {
		t.Fatalf("%d boxes, want 1..%d", len(got), maxBoxes)
	}
	all := got[0]
	for _, r := range got[1:] {
		all = all.Union(r)
	}
	if all != image.Rect(0, 0, 49*30+4, 59*30+4) {
		t.Errorf("the boxes cover %v, want every change", all)
	}
}
