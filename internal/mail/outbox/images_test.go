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
// it shows and carries one picture, the phone's: the HTML by cid with its alt text, the text
// part by name, and the picture decodes from its inline part.
func TestComposeWithImages(t *testing.T) {
	t.Parallel()
	r := sampleReply()
	r.Images = []Image{
		{ContentID: "p1-desktop@job-42.webordinary", ContentType: "image/png", Data: testPNG(t, 64, 40), Width: 64, Height: 40,
			Alt: `The page "Home" (/) on a desktop screen; the changed part is outlined.`},
		{ContentID: "p1-phone@job-42.webordinary", ContentType: "image/png", Data: testPNG(t, 32, 60), Width: 32, Height: 60,
			Screen: "phone", Alt: `The page "Home" (/) on a phone screen; the changed part is outlined.`},
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
	phone, desktop := r.Images[1], r.Images[0]
	if !strings.Contains(env.HTML, `src="cid:`+phone.ContentID+`"`) || !strings.Contains(env.Text, "[Picture: "+phone.Alt+"]") {
		t.Errorf("the parts do not show %s:\n%s\n%s", phone.ContentID, env.HTML, env.Text)
	}
	if strings.Contains(env.HTML, desktop.ContentID) || strings.Contains(env.Text, desktop.Alt) {
		t.Errorf("the parts show the desktop picture too:\n%s\n%s", env.HTML, env.Text)
	}
	if !strings.Contains(env.HTML, `alt="The page &#34;Home&#34; (/) on a phone screen; the changed part is outlined."`) {
		t.Errorf("alt text missing or unescaped:\n%s", env.HTML)
	}
	if len(env.Inlines) != 1 {
		t.Fatalf("inline parts = %d, want 1", len(env.Inlines))
	}
	img, err := png.Decode(bytes.NewReader(env.Inlines[0].Content))
	if err != nil || env.Inlines[0].ContentID != phone.ContentID || img.Bounds().Dx() != phone.Width {
		t.Errorf("inline part: id %q, %v, %v", env.Inlines[0].ContentID, err, img)
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
