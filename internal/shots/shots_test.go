package shots_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/shots"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

const page = `<!doctype html><html><head><title>Acme</title><link rel="stylesheet" href="/style.css"></head>
<body><header>Acme bakery</header><main><h1>Fresh bread</h1><p>Every morning from six.</p></main></body></html>`

func style(header string) string {
	return `body{margin:0;font:16px sans-serif} header{background:` + header + `;color:#fff;height:96px;padding:24px}
main{padding:24px}`
}

// TestHeaderTurnsGreen changes only the style sheet: the index is picked, its header is
// marked at both widths, the rest of the page is the same, and the reply's pictures decode
// at their size with the header green.
func TestHeaderTurnsGreen(t *testing.T) {
	t.Parallel()
	f := setup(t, shots.Config{})
	f.deploy(map[string]string{"index.html": page, "about/index.html": page, "style.css": style("#c00")})
	rep, err := f.shoot("job-green", f.deploy(map[string]string{"style.css": style("#080")}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pages) != 1 || rep.Pages[0].Path != "/" || len(rep.Pages[0].Shots) != 2 {
		t.Fatalf("report = %+v, want the index at two widths", rep)
	}
	if rep.MailBytes > shots.DefaultMailBytes || rep.MailBytes == 0 {
		t.Errorf("the reply's pictures weigh %d bytes", rep.MailBytes)
	}
	for i, w := range []shots.Width{shots.Desktop, shots.Phone} {
		pic := rep.Pages[0].Shots[i]
		checkHeaderOnly(t, w, f.picture("job-green", pic.Before), f.picture("job-green", pic.After))
		if len(pic.Boxes) != 1 || pic.Boxes[0].Y > 4 || pic.Boxes[0].Y+pic.Boxes[0].H > 150 {
			t.Errorf("%s boxes = %+v, want one around the header", w.Name, pic.Boxes)
		}
		mail := f.picture("job-green", pic.Mail)
		if got, want := mail.Bounds().Size(), shots.MailSize(w); got != want {
			t.Errorf("%s reply picture is %v, want %v", w.Name, got, want)
		}
		if c := mail.At(mail.Bounds().Dx()/2, 20); !greenish(c) {
			t.Errorf("%s reply picture's header is %v, want green", w.Name, c)
		}
		if !strings.Contains(pic.Alt, w.Name) || !strings.Contains(pic.Alt, "outlined") {
			t.Errorf("alt text %q", pic.Alt)
		}
	}
}

// checkHeaderOnly checks that the header went from red to green and nothing below it changed.
func checkHeaderOnly(t *testing.T, w shots.Width, before, after image.Image) {
	t.Helper()
	if before.Bounds() != after.Bounds() || before.Bounds().Dx() != w.Width {
		t.Fatalf("%s: before %v, after %v", w.Name, before.Bounds(), after.Bounds())
	}
	if b, a := before.At(w.Width-10, 10), after.At(w.Width-10, 10); !reddish(b) || !greenish(a) {
		t.Errorf("%s header pixel went from %v to %v, want red to green", w.Name, b, a)
	}
	for y := 150; y < before.Bounds().Dy(); y += 3 {
		for x := 0; x < w.Width; x += 3 {
			if before.At(x, y) != after.At(x, y) {
				t.Fatalf("%s: pixel (%d,%d) below the header changed: %v → %v", w.Name, x, y, before.At(x, y), after.At(x, y))
			}
		}
	}
}

func reddish(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r > 0xa000 && g < 0x3000 && b < 0x3000
}

func greenish(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return g > 0x6000 && r < 0x3000 && b < 0x3000
}

// TestLoopingPageIsCutOff: a page whose script never yields costs its own picture, cut off by
// the page budget (not the job's); the other changed page still gets its picture. The budget
// is long enough for a loaded machine to render the good page within it.
func TestLoopingPageIsCutOff(t *testing.T) {
	t.Parallel()
	budget := 15 * time.Second
	f := setup(t, shots.Config{Widths: []shots.Width{shots.Desktop}, PageBudget: budget})
	f.deploy(map[string]string{"index.html": page, "about/index.html": page, "style.css": style("#c00")})
	rep, err := f.shoot("job-loop", f.deploy(map[string]string{
		"index.html":       strings.Replace(page, "Fresh bread", "Fresh rolls", 1),
		"about/index.html": strings.Replace(page, "</body>", "<script>for(;;){}</script></body>", 1),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pages) != 1 || rep.Pages[0].Path != "/" {
		t.Errorf("pages = %+v, want only the index", rep.Pages)
	}
	if want := "/about/ at desktop width: cut off after " + budget.String(); !strings.Contains(rep.Note, want) {
		t.Errorf("note = %q, want %q (the page budget, not the job's)", rep.Note, want)
	}
}

// TestUnchangedPageGetsNoPicture: HTML that changed without changing how the page looks
// (a comment) is dropped, and the reply gets no picture.
func TestUnchangedPageGetsNoPicture(t *testing.T) {
	t.Parallel()
	f := setup(t, shots.Config{Widths: []shots.Width{shots.Desktop}})
	f.deploy(map[string]string{"index.html": page, "style.css": style("#c00")})
	rep, err := f.shoot("job-same", f.deploy(map[string]string{"index.html": page + "<!-- edited -->"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pages) != 0 || len(rep.Unchanged) != 1 || rep.Unchanged[0] != "/" || rep.MailBytes != 0 {
		t.Errorf("report = %+v, want / unchanged and no pictures", rep)
	}
	if got, err := f.sh.Store().Report("job-same"); err != nil || len(got.Unchanged) != 1 {
		t.Errorf("stored report = %+v, %v", got, err)
	}
}

// TestFollowUpReusesThePicturesBefore: the next job's before pictures are the last job's
// after pictures, taken once.
func TestFollowUpReusesThePicturesBefore(t *testing.T) {
	t.Parallel()
	f := setup(t, shots.Config{Widths: []shots.Width{shots.Desktop}})
	f.deploy(map[string]string{"index.html": page, "style.css": style("#c00")})
	rep, err := f.shoot("job-1", f.deploy(map[string]string{"style.css": style("#080")}))
	if err != nil || rep.Rendered != 2 || rep.Reused != 0 {
		t.Fatalf("first job: %+v, %v; want 2 pictures rendered", rep, err)
	}
	warm := f.sh.Warm(context.Background()) // as the pipeline does while the site builds
	rep, err = f.shootWarm("job-2", f.deploy(map[string]string{"style.css": style("#00c")}), warm)
	if err != nil || rep.Rendered != 1 || rep.Reused != 1 || len(rep.Pages) != 1 {
		t.Fatalf("follow-up: %+v, %v; want 1 rendered, 1 reused", rep, err)
	}
	before := f.picture("job-2", rep.Pages[0].Shots[0].Before)
	if c := before.At(1200, 10); !greenish(c) {
		t.Errorf("the follow-up's before header is %v, want the first job's green", c)
	}
}
