package shots

import (
	"bytes"
	"image"
	"image/jpeg"
	"image/png"
)

// mailWidth is how wide a width's picture is in the reply: half a desktop (a reply's column is
// about 600 px), a phone at a size that leaves it legible next to text.
func mailWidth(w Width) int {
	if w.Mobile {
		return min(w.Width, 320)
	}
	return min(w.Width, 640)
}

// MailSize is the size of a width's picture in the reply: its viewport, cropped around the
// change and scaled to the reply's column.
func MailSize(w Width) image.Point {
	mw := mailWidth(w)
	return image.Pt(mw, w.Height*mw/w.Width)
}

// mailCrop is the viewport-sized window of img that shows the boxes: centred on them, or
// starting at their top when they are taller than the window; the top of the page without
// boxes.
func mailCrop(img image.Image, boxes []image.Rectangle, w Width) image.Rectangle {
	b := img.Bounds()
	h := min(w.Height, b.Dy())
	top := b.Min.Y
	if len(boxes) > 0 {
		u := boxes[0]
		for _, r := range boxes[1:] {
			u = u.Union(r)
		}
		top = u.Min.Y - 16
		if u.Dy() < h {
			top = (u.Min.Y+u.Max.Y)/2 - h/2
		}
		top = max(b.Min.Y, min(top, b.Max.Y-h))
	}
	return image.Rect(b.Min.X, top, b.Max.X, top+h)
}

// scale returns the region r of src scaled to width dw, averaging the source pixels each
// target pixel covers (a box filter: sharp enough for downscaling screenshots).
func scale(src *image.RGBA, r image.Rectangle, dw int) *image.RGBA {
	dh := max(1, r.Dy()*dw/r.Dx())
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := range dh {
		y0, y1 := r.Min.Y+y*r.Dy()/dh, r.Min.Y+max((y+1)*r.Dy()/dh, y*r.Dy()/dh+1)
		for x := range dw {
			x0, x1 := r.Min.X+x*r.Dx()/dw, r.Min.X+max((x+1)*r.Dx()/dw, x*r.Dx()/dw+1)
			var sum [4]int
			for sy := y0; sy < y1; sy++ {
				row := src.Pix[src.PixOffset(x0, sy):src.PixOffset(x1, sy)]
				for i := 0; i < len(row); i += 4 {
					sum[0], sum[1], sum[2], sum[3] = sum[0]+int(row[i]), sum[1]+int(row[i+1]), sum[2]+int(row[i+2]), sum[3]+int(row[i+3])
				}
			}
			n := (y1 - y0) * (x1 - x0)
			o := dst.PixOffset(x, y)
			for c := range 4 {
				dst.Pix[o+c] = uint8(sum[c] / n)
			}
		}
	}
	return dst
}

// encodeMail encodes img as the smaller of PNG (flat pages, sharp text) and JPEG at quality q
// (photographs), returning the bytes and their content type.
func encodeMail(img image.Image, q int) ([]byte, string) {
	var p, j bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	_ = enc.Encode(&p, img)
	_ = jpeg.Encode(&j, img, &jpeg.Options{Quality: q})
	if p.Len() > 0 && p.Len() <= j.Len() {
		return p.Bytes(), "image/png"
	}
	return j.Bytes(), "image/jpeg"
}

// encodePNG encodes a full-size picture for the job page.
func encodePNG(img image.Image) []byte {
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	_ = enc.Encode(&b, img)
	return b.Bytes()
}
