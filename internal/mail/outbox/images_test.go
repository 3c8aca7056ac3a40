package outbox

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/jhillyerd/enmime/v2"
)

func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(1, 1, color.RGBA{0, 128, 0, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestComposeWithImages: a reply with pictures is multipart/related around the alternative;
// the HTML shows each picture by cid with its alt text, the text part names them, and each
// picture decodes from its inline part.
func TestComposeWithImages(t *testing.T) {
	t.Parallel()
	r := sampleReply()
	r.Images = []Image{
		{ContentID: "p1-desktop@job-42.webordinary", ContentType: "image/png", Data: testPNG(t, 64, 40), Width: 64, Height: 40,
			Alt: `The page "Home" (/) on a desktop screen; the changed part is outlined.`},
		{ContentID: "p1-phone@job-42.webordinary", ContentType: "image/png", Data: testPNG(t, 32, 60), Width: 32, Height: 60,
			Alt: "The page / on a phone screen."},
	}
	msg, err := Compose(r, newClock().Now())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msg), "Content-Type: multipart/related;") {
		t.Fatalf("not multipart/related:\n%.600s", msg)
	}
	env, err := enmime.ReadEnvelope(bytes.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range r.Images {
		if !strings.Contains(env.HTML, `src="cid:`+im.ContentID+`"`) || !strings.Contains(env.Text, "[Picture: "+im.Alt+"]") {
			t.Errorf("the parts do not show %s:\n%s\n%s", im.ContentID, env.HTML, env.Text)
		}
	}
	if !strings.Contains(env.HTML, `alt="The page &#34;Home&#34; (/) on a desktop screen; the changed part is outlined."`) {
		t.Errorf("alt text missing or unescaped:\n%s", env.HTML)
	}
	if len(env.Inlines) != 2 {
		t.Fatalf("inline parts = %d, want 2", len(env.Inlines))
	}
	for i, p := range env.Inlines {
		img, err := png.Decode(bytes.NewReader(p.Content))
		if err != nil || p.ContentID != r.Images[i].ContentID || img.Bounds().Dx() != r.Images[i].Width {
			t.Errorf("inline part %d: id %q, %v, %v", i, p.ContentID, err, img)
		}
	}
}

func TestComposeRefusesABadContentID(t *testing.T) {
	t.Parallel()
	r := sampleReply()
	r.Images = []Image{{ContentID: `x"><script>`, ContentType: "image/png", Data: []byte{1}}}
	if _, err := Compose(r, newClock().Now()); err == nil {
		t.Error("composed a reply with a content id that is not plain")
	}
}
