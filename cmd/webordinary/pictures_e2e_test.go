package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg"
	_ "image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/jhillyerd/enmime/v2"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/shots"
)

const picturesPage = `<!doctype html><html><head><title>Bakery</title><link rel="stylesheet" href="/style.css"></head>
<body><header>Acme bakery</header><main><h1>Fresh bread</h1><p>Every morning from six.</p></main></body></html>
`

const picturesStyle = `body{margin:0;font:16px sans-serif} header{background:#c00;color:#fff;height:96px;padding:24px} main{padding:24px}
`

// picturesSetup is mailSetup on a site with a red header, whose agent runs the instruction as
// a shell command in the working copy.
func picturesSetup(t *testing.T) *mailSetup {
	t.Helper()
	capability.Need(t, capability.Chromium)
	return newMailSetupOf(t, [][2]string{{"index.html", picturesPage}, {"style.css", picturesStyle}},
		`sh -c "$WO_INSTRUCTION" && echo "Done: $WO_INSTRUCTION"`)
}

// sendAndWait emails instruction to the bakery, in the thread of the message first (if not
// ""), and returns the nth reply, parsed.
func (m *mailSetup) sendAndWait(t *testing.T, id, first, instruction string, n int) *enmime.Envelope {
	t.Helper()
	raw := fmt.Sprintf("From: Alice <alice@example.com>\r\nTo: edit@edit.example.net\r\nSubject: Our homepage\r\nMessage-ID: <%s>\r\n", id)
	if first != "" {
		raw += fmt.Sprintf("In-Reply-To: <%s>\r\nReferences: <%s>\r\n", first, first)
	}
	raw += fmt.Sprintf("Date: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s\r\n", time.Now().Format(time.RFC1123Z), instruction)
	var signed bytes.Buffer
	if err := dkim.Sign(&signed, strings.NewReader(raw), &dkim.SignOptions{Domain: "example.com", Selector: "sel", Signer: m.key}); err != nil {
		t.Fatal(err)
	}
	m.swaks(t, signed.Bytes())
	replies := m.sink.received(t, n, 90*time.Second)
	if len(replies) < n {
		t.Fatalf("%d replies, want %d", len(replies), n)
	}
	env, err := enmime.ReadEnvelope(bytes.NewReader(replies[n-1]))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestReplyShowsTheGreenHeader: the project's first edit is pictured against the default
// branch's build (a never-published project's before, so not called a new page); in the
// thread, an emailed instruction that makes the header green
// (a style-sheet-only change) gets a reply with the index pictured inline at phone width; the
// picture decodes at its size, the header is green, and between the job's before and after
// pictures only the header changed. The next instruction, whose page loops
// forever, is cut off by the budget and still gets its reply, without pictures.
func TestReplyShowsTheGreenHeader(t *testing.T) {
	t.Parallel()
	m := picturesSetup(t)
	env := m.sendAndWait(t, "first@example.com", "", "sed -i s/six/seven/ index.html", 1)
	if len(env.Inlines) != 1 || strings.Contains(env.HTML, "new page") {
		t.Errorf("the project's first preview: %d pictures, want the index once, not as a new page:\n%s", len(env.Inlines), env.Text)
	}
	env = m.sendAndWait(t, "green@example.com", "first@example.com", "sed -i s/#c00/#080/ style.css", 2)
	if len(env.Inlines) != 1 {
		t.Fatalf("%d inline parts, want the index at phone width:\n%s", len(env.Inlines), env.Text)
	}
	for i, w := range []shots.Width{shots.Phone} {
		p := env.Inlines[i]
		img, _, err := image.Decode(bytes.NewReader(p.Content))
		if err != nil {
			t.Fatalf("inline %d (%s): %v", i, p.ContentType, err)
		}
		if got, want := img.Bounds().Size(), shots.MailSize(w); got != want {
			t.Errorf("%s picture is %v, want %v", w.Name, got, want)
		}
		if c := img.At(img.Bounds().Dx()/2, 20); !isGreen(c) {
			t.Errorf("%s picture's header is %v, want green", w.Name, c)
		}
		if !strings.Contains(env.HTML, `src="cid:`+p.ContentID+`"`) {
			t.Errorf("the HTML does not show %s", p.ContentID)
		}
	}
	if !strings.Contains(env.HTML, "the changed part is outlined") {
		t.Errorf("no alt text in the HTML:\n%s", env.HTML)
	}
	job := env.Root.Header.Get("X-Webordinary-Job")
	checkOnlyHeaderChanged(t, filepath.Join(m.c.dir, "data", "shots", job))

	env = m.sendAndWait(t, "loop@example.com", "first@example.com", `sed -i "s|</body>|<script>for(;;){}</script></body>|" index.html`, 3)
	if len(env.Inlines) != 0 || !strings.Contains(env.Text, "ready to look at") {
		t.Errorf("the looping page's reply: %d pictures, text:\n%s", len(env.Inlines), env.Text)
	}
	rep, err := (shots.Store{Dir: filepath.Join(m.c.dir, "data", "shots")}).Report(env.Root.Header.Get("X-Webordinary-Job"))
	if err != nil || !strings.Contains(rep.Note, "cut off") {
		t.Errorf("the looping page's report: %+v, %v", rep, err)
	}
}

// checkOnlyHeaderChanged compares the job's full-size desktop pictures: the header went from
// red to green; below it nothing changed.
func checkOnlyHeaderChanged(t *testing.T, dir string) {
	t.Helper()
	before, after := decodeFile(t, filepath.Join(dir, "p1-desktop-before.png")), decodeFile(t, filepath.Join(dir, "p1-desktop-after.png"))
	if b, a := before.At(1200, 10), after.At(1200, 10); !isRed(b) || !isGreen(a) {
		t.Errorf("header pixel went from %v to %v, want red to green", b, a)
	}
	for y := 150; y < before.Bounds().Dy(); y += 2 {
		for x := 0; x < before.Bounds().Dx(); x += 2 {
			if before.At(x, y) != after.At(x, y) {
				t.Fatalf("pixel (%d,%d) below the header changed", x, y)
			}
		}
	}
}

func decodeFile(t *testing.T, p string) image.Image {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func isRed(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r > 0xa000 && g < 0x3000 && b < 0x3000
}

func isGreen(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return g > 0x6000 && r < 0x3000 && b < 0x3000
}
