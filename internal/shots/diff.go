package shots

import (
	"cmp"
	"image"
	"image/color"
	"image/draw"
	"slices"
)

// diffCell is the side of the grid cells changed pixels are grouped by.
const diffCell = 8

// diffThreshold is the summed per-channel difference (0-765) below which two pixels count as
// the same: anti-aliasing noise stays out.
const diffThreshold = 24

// maxBoxes bounds the marks on one picture; more regions are merged into one.
const maxBoxes = 6

// Diff compares two pictures of a page and returns the regions that changed, in after's
// coordinates, and the share of pixels that changed. Pixels only one picture has (the page grew
// or shrank) count as changed. Regions closer than two grid cells are merged.
func Diff(before, after image.Image) (boxes []image.Rectangle, changed float64) {
	return diffRGBA(toRGBA(before), toRGBA(after))
}

func diffRGBA(before, after *image.RGBA) (boxes []image.Rectangle, changed float64) {
	b := before.Bounds().Union(after.Bounds())
	cols, rows := (b.Dx()+diffCell-1)/diffCell, (b.Dy()+diffCell-1)/diffCell
	grid := make([]image.Rectangle, cols*rows) // tight bounds of the changed pixels per cell
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if samePixel(before, after, x, y) {
				continue
			}
			n++
			i := (y/diffCell)*cols + x/diffCell
			grid[i] = grid[i].Union(image.Rect(x, y, x+1, y+1))
		}
	}
	if n == 0 {
		return nil, 0
	}
	return regions(grid, cols, rows), float64(n) / float64(b.Dx()*b.Dy())
}

func samePixel(a, b *image.RGBA, x, y int) bool {
	p := image.Pt(x, y)
	if !p.In(a.Bounds()) || !p.In(b.Bounds()) {
		return false
	}
	i, j := a.PixOffset(x, y), b.PixOffset(x, y)
	d := absDiff(a.Pix[i], b.Pix[j]) + absDiff(a.Pix[i+1], b.Pix[j+1]) + absDiff(a.Pix[i+2], b.Pix[j+2])
	return d < diffThreshold
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// toRGBA returns img as an *image.RGBA, converting it if need be.
func toRGBA(img image.Image) *image.RGBA {
	if r, ok := img.(*image.RGBA); ok {
		return r
	}
	out := image.NewRGBA(img.Bounds())
	draw.Draw(out, out.Bounds(), img, img.Bounds().Min, draw.Src)
	return out
}

// regions groups changed cells into connected regions (cells within two cells of each other
// belong together) and returns their tight bounds, top to bottom, at most maxBoxes.
func regions(grid []image.Rectangle, cols, rows int) []image.Rectangle {
	seen := make([]bool, len(grid))
	var out []image.Rectangle
	for i := range grid {
		if seen[i] || grid[i].Empty() {
			continue
		}
		out = append(out, flood(grid, seen, cols, rows, i))
	}
	return mergeNearest(out, maxBoxes)
}

// mergeNearest merges boxes two at a time until at most n are left, each time the pair whose
// union adds the least area that neither covered: near regions join, far ones stay apart
// (one box around them all would outline mostly what did not change).
func mergeNearest(boxes []image.Rectangle, n int) []image.Rectangle {
	for len(boxes) > maxGreedy { // the pairwise search is cubic: first halve by neighbours top to bottom
		slices.SortFunc(boxes, func(a, b image.Rectangle) int { return cmp.Or(a.Min.Y-b.Min.Y, a.Min.X-b.Min.X) })
		half := boxes[:0]
		for i := 0; i < len(boxes); i += 2 {
			r := boxes[i]
			if i+1 < len(boxes) {
				r = r.Union(boxes[i+1])
			}
			half = append(half, r)
		}
		boxes = half
	}
	for len(boxes) > n {
		bi, bj, best := 0, 1, -1
		for i := range boxes {
			for j := i + 1; j < len(boxes); j++ {
				if waste := area(boxes[i].Union(boxes[j])) - area(boxes[i]) - area(boxes[j]); best < 0 || waste < best {
					bi, bj, best = i, j, waste
				}
			}
		}
		boxes[bi] = boxes[bi].Union(boxes[bj])
		boxes = append(boxes[:bj], boxes[bj+1:]...)
	}
	return boxes
}

func area(r image.Rectangle) int { return r.Dx() * r.Dy() }

// maxGreedy bounds the boxes mergeNearest searches pairwise.
const maxGreedy = 48

// maxMarkedShare is the share of the view the outlines may cover: past it, what changed
// fills the view (a new layout, a new picture) and outlines would only hide it.
const maxMarkedShare = 0.5

// outlines returns the boxes worth outlining on a picture with bounds b at width w: all of
// them, or none when together they cover more than maxMarkedShare of the view (the screen at
// w, or the picture when it is shorter).
func outlines(boxes []image.Rectangle, b image.Rectangle, w Width) []image.Rectangle {
	h := b.Dy()
	if w.Height > 0 {
		h = min(h, w.Height)
	}
	view := b.Dx() * h
	covered := 0
	for _, r := range boxes {
		covered += area(r.Intersect(b))
	}
	if float64(covered) > maxMarkedShare*float64(view) {
		return nil
	}
	return boxes
}

// flood collects the region of cell start.
func flood(grid []image.Rectangle, seen []bool, cols, rows, start int) image.Rectangle {
	const reach = 2
	box := image.Rectangle{}
	stack := []int{start}
	seen[start] = true
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		box = box.Union(grid[i])
		cx, cy := i%cols, i/cols
		for y := max(cy-reach, 0); y <= min(cy+reach, rows-1); y++ {
			for x := max(cx-reach, 0); x <= min(cx+reach, cols-1); x++ {
				j := y*cols + x
				if !seen[j] && !grid[j].Empty() {
					seen[j] = true
					stack = append(stack, j)
				}
			}
		}
	}
	return box
}

// markColor is the colour of the marks: a magenta few sites use.
var markColor = color.RGBA{0xe6, 0x00, 0x7a, 0xff}

// Mark returns a copy of img with an outline around each box, a few pixels outside it.
func Mark(img image.Image, boxes []image.Rectangle) *image.RGBA {
	out := image.NewRGBA(img.Bounds())
	draw.Draw(out, out.Bounds(), img, img.Bounds().Min, draw.Src)
	const pad, line = 4, 3
	for _, r := range boxes {
		r = r.Inset(-pad).Intersect(out.Bounds())
		edges := []image.Rectangle{
			{r.Min, image.Pt(r.Max.X, r.Min.Y+line)}, {image.Pt(r.Min.X, r.Max.Y-line), r.Max},
			{r.Min, image.Pt(r.Min.X+line, r.Max.Y)}, {image.Pt(r.Max.X-line, r.Min.Y), r.Max},
		}
		for _, e := range edges {
			draw.Draw(out, e.Intersect(r), &image.Uniform{markColor}, image.Point{}, draw.Src)
		}
	}
	return out
}
