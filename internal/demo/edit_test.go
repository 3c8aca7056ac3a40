package demo

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEdit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		instruction string
		want        map[string][]string // file → substrings it must contain
		notWant     map[string][]string // file → substrings it must not contain
		changed     []string
		summary     []string // substrings of the summary
	}{
		{
			name:        "replace everywhere",
			instruction: "Replace Sunrise Bakery with Moonrise Bakery.",
			want: map[string][]string{
				"index.html": {"<title>Moonrise Bakery</title>", "<h1>Moonrise Bakery</h1>", "<p>Moonrise Bakery · Baked"},
				"about.html": {"<title>About us – Moonrise Bakery</title>"},
			},
			notWant: map[string][]string{"index.html": {"Sunrise"}, "about.html": {"Sunrise"}},
			changed: []string{"about.html", "index.html"},
			summary: []string{`replaced "Sunrise Bakery" with "Moonrise Bakery" in about.html (3 places), index.html (3 places)`},
		},
		{
			name:        "replace in one file",
			instruction: "replace Sunrise Bakery with Moonrise Bakery in about.html",
			want:        map[string][]string{"about.html": {"Moonrise Bakery"}, "index.html": {"Sunrise Bakery"}},
			notWant:     map[string][]string{"about.html": {"Sunrise"}},
			changed:     []string{"about.html"},
		},
		{
			name:        "replace ignoring case and escaping",
			instruction: `replace "harbour street" with "Quay Road & Co"`,
			want:        map[string][]string{"index.html": {"at 12 Quay Road &amp; Co."}, "about.html": {"on Quay Road &amp; Co."}},
			summary:     []string{"(matched ignoring case)"},
			changed:     []string{"about.html", "index.html"},
		},
		{
			name:        "replace in css",
			instruction: "Replace #b5541c with #2e7d32 in style.css",
			want:        map[string][]string{"style.css": {"color: #2e7d32;"}},
			changed:     []string{"style.css"},
		},
		{
			name:        "replace value containing in",
			instruction: "replace Open Tuesday to Sunday with Open daily in summer",
			want:        map[string][]string{"index.html": {"<p>Open daily in summer, 7am"}},
			changed:     []string{"index.html"},
		},
		{
			name:        "set the title and the matching h1",
			instruction: "Set the title to Moonrise Café",
			want:        map[string][]string{"index.html": {"<title>Moonrise Café</title>", "<h1>Moonrise Café</h1>", "<p>Sunrise Bakery · Baked"}},
			changed:     []string{"index.html"},
			summary:     []string{`set the title of index.html and its <h1> heading to "Moonrise Café"`},
		},
		{
			name:        "set the title keeps a different h1",
			instruction: "Set the heading to Welcome. Set the title to Moonrise",
			want:        map[string][]string{"index.html": {"<title>Moonrise</title>", "<h1>Welcome</h1>"}},
			changed:     []string{"index.html"},
		},
		{
			name:        "set the heading",
			instruction: "Please set the heading to Good morning!",
			want:        map[string][]string{"index.html": {"<h1>Good morning</h1>", "<title>Sunrise Bakery</title>"}},
			changed:     []string{"index.html"},
		},
		{
			name:        "change the header, quoted",
			instruction: "Change the header to “Fresh & warm. Every day.”",
			want:        map[string][]string{"index.html": {"<h1>Fresh &amp; warm. Every day.</h1>"}},
			changed:     []string{"index.html"},
		},
		{
			name:        "make the header a colour",
			instruction: "make the header green",
			want:        map[string][]string{"style.css": {"h1 {\n  margin: 0;\n  font-size: 2.6rem;\n  color: green;\n}"}},
			notWant:     map[string][]string{"style.css": {"#b5541c"}},
			changed:     []string{"style.css"},
			summary:     []string{"made the header (h1) green in style.css"},
		},
		{
			name:        "change the header colour, two words",
			instruction: "Change the header colour to Dark Olive Green.",
			want:        map[string][]string{"style.css": {"color: darkolivegreen;"}},
			changed:     []string{"style.css"},
		},
		{
			name:        "change the header to a colour",
			instruction: "change the header to navy",
			want:        map[string][]string{"style.css": {"color: navy;"}, "index.html": {"<h1>Sunrise Bakery</h1>"}},
			changed:     []string{"style.css"},
		},
		{
			name:        "make the background hex",
			instruction: "Make the background #FFEEDD.",
			want:        map[string][]string{"style.css": {"background-color: #ffeedd;\n}\n\nheader"}},
			changed:     []string{"style.css"},
			summary:     []string{"made the page background #ffeedd in style.css"},
		},
		{
			name:        "add a paragraph",
			instruction: "add a paragraph saying Fresh bread every morning.",
			want:        map[string][]string{"index.html": {"    <p>Open Tuesday to Sunday, 7am to 2pm, at 12 Harbour Street.</p>\n    <p>Fresh bread every morning.</p>\n  </main>"}},
			changed:     []string{"index.html"},
		},
		{
			name:        "add a paragraph escapes html",
			instruction: `Add a paragraph saying "<script>alert(1)</script>"`,
			want:        map[string][]string{"index.html": {"<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"}},
			changed:     []string{"index.html"},
		},
		{
			name:        "add a page",
			instruction: "Add a page called Contact Us.",
			want: map[string][]string{
				"contact-us.html": {"<title>Contact Us – Sunrise Bakery</title>", "<h1>Sunrise Bakery</h1>", "<h2>Contact Us</h2>",
					`<a href="contact-us.html">Contact Us</a>`, "<footer>"},
				"index.html": {"      <a href=\"about.html\">About us</a>\n      <a href=\"contact-us.html\">Contact Us</a>\n    </nav>"},
				"about.html": {`<a href="contact-us.html">Contact Us</a>`},
			},
			notWant: map[string][]string{"contact-us.html": {"Today's menu"}},
			changed: []string{"about.html", "contact-us.html", "index.html"},
			summary: []string{`added the page contact-us.html ("Contact Us"), linked from about.html, index.html`},
		},
		{
			name:        "add a page, short form",
			instruction: "create a new contact page",
			want:        map[string][]string{"contact.html": {"<h2>Contact</h2>"}},
			changed:     []string{"about.html", "contact.html", "index.html"},
		},
		{
			name:        "the sample instruction",
			instruction: SampleInstruction,
			want:        map[string][]string{"style.css": {"color: green;"}, "index.html": {"<p>Fresh bread every morning.</p>"}},
			changed:     []string{"index.html", "style.css"},
		},
		{
			name: "several edits, filler, greeting and signature",
			instruction: "Hi there,\n\nCould you please set the title to “Moonrise Bakery”, thanks!\n" +
				"Then make the background light blue; replace 'Sourdough loaf' with 'Country sourdough' in index.html please.\n" +
				"Also add a page called Contact and add a paragraph saying We deliver.\n\nBest,\nAlice\n-- \nAlice Baker\n07700 900123",
			want: map[string][]string{
				"index.html":   {"<title>Moonrise Bakery</title>", "<li>Country sourdough <span", "<p>We deliver.</p>", `href="contact.html"`},
				"style.css":    {"background-color: lightblue;"},
				"contact.html": {"<title>Contact – Moonrise Bakery</title>"},
			},
			changed: []string{"about.html", "contact.html", "index.html", "style.css"},
		},
		{
			name:        "a page then an edit of it",
			instruction: `Add a page called Team. Replace "This page is new; nothing has been written on it yet." with "Meet us" in team.html`,
			want:        map[string][]string{"team.html": {"<p>Meet us</p>"}},
			changed:     []string{"about.html", "index.html", "team.html"},
		},
		{
			name:        "quoted reply is ignored",
			instruction: "make the header red\n\nOn Mon, 1 Jan 2024, Alice wrote:\n> make the header blue",
			want:        map[string][]string{"style.css": {"color: red;"}},
			changed:     []string{"style.css"},
		},
		{
			name:        "already so",
			instruction: "replace Sunrise with Sunrise in about.html",
			changed:     nil,
			summary:     []string{"No file needed changing."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := setup(t)
			summary, changed, err := Edit(dir, tt.instruction)
			if err != nil {
				t.Fatalf("Edit: %v", err)
			}
			if !strings.HasPrefix(summary, SummaryPrefix) {
				t.Errorf("summary %q does not start with %q", summary, SummaryPrefix)
			}
			for _, s := range tt.summary {
				if !strings.Contains(summary, s) {
					t.Errorf("summary %q does not contain %q", summary, s)
				}
			}
			if !slices.Equal(changed, tt.changed) {
				t.Errorf("changed = %q, want %q", changed, tt.changed)
			}
			checkFiles(t, dir, tt.want, true)
			checkFiles(t, dir, tt.notWant, false)
		})
	}
}

func checkFiles(t *testing.T, dir string, files map[string][]string, want bool) {
	t.Helper()
	for name, subs := range files {
		text := read(t, dir, name)
		for _, s := range subs {
			if strings.Contains(text, s) != want {
				t.Errorf("%s: contains %q = %v, want %v; file:\n%s", name, s, !want, want, text)
			}
		}
	}
}

func TestEditRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		instruction string
		wantErr     error
		wantMsg     []string
	}{
		{"not understood", "Make it pop", ErrNotUnderstood, []string{`did not understand "Make it pop"`, "the demo agent only does literal edits: replace OLD with NEW"}},
		{"unknown verb", "delete the about page", ErrNotUnderstood, []string{`"delete the about page"`}},
		{"one of several", "make the header green. Also fix my spelling.", ErrNotUnderstood, []string{`"Also fix my spelling."`}},
		{"not a colour", "make the header bold", ErrNotUnderstood, []string{`"bold" is not a colour`}},
		{"empty", "Thanks!", ErrNotUnderstood, []string{"found no edit"}},
		{"unquoted and plus verb", "add a paragraph saying Cakes and make the best of it", ErrNotUnderstood, []string{`"make the best of it"`}},
		{"traversal", "replace a with b in ../x", ErrUnsafePath, []string{"../x"}},
		{"deep traversal", "replace a with b in pages/../../x.html", ErrUnsafePath, nil},
		{"absolute", "replace root with x in /etc/passwd", ErrUnsafePath, nil},
		{"hidden", "replace main with x in .git/HEAD", ErrUnsafePath, []string{"hidden"}},
		{"not editable", "replace a with b in images/logo.png", ErrUnsafePath, nil},
		{"symbolic link", "replace secret with public in link.html", ErrUnsafePath, []string{"symbolic link"}},
		{"missing file", "replace a with b in nope.html", ErrNotFound, nil},
		{"text not found", "replace Croissant Deluxe with Cake", ErrNotFound, []string{`did not find "Croissant Deluxe"`}},
		{"markup is not text", "replace href with x", ErrNotFound, nil},
		{"page exists", "add a page called About", ErrExists, nil},
		{"all or nothing", "make the header green and add a paragraph saying hi and replace Nope with Yes", ErrNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := setup(t)
			outside := filepath.Join(t.TempDir(), "secret.html")
			if err := os.WriteFile(outside, []byte("<p>secret</p>"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "link.html")); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			_, _, err := Edit(dir, tt.instruction)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Edit error = %v, want %v", err, tt.wantErr)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if after := snapshot(t, dir); !maps.Equal(before, after) {
				t.Errorf("files changed by a refused instruction")
			}
			if got := read(t, filepath.Dir(outside), "secret.html"); got != "<p>secret</p>" {
				t.Errorf("file outside the site changed: %q", got)
			}
		})
	}
}

// TestEditSymlinkSkipped checks that replacing everywhere does not follow a link out of
// the site.
func TestEditSymlinkSkipped(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "x.html"), []byte("<p>Sunrise Bakery</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"link.html", "linkdir"} {
		target := filepath.Join(outside, "x.html")
		if link == "linkdir" {
			target = outside
		}
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := Edit(dir, "replace Sunrise with Moonrise"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, outside, "x.html"); got != "<p>Sunrise Bakery</p>" {
		t.Errorf("file outside the site changed: %q", got)
	}
	if _, _, err := Edit(dir, "replace Bakery with Cafe in linkdir/x.html"); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("edit through a linked directory: error = %v, want ErrUnsafePath", err)
	}
}

// TestEditStylesheet covers sites whose stylesheet lacks the rule, or that have none.
func TestEditStylesheet(t *testing.T) {
	t.Parallel()
	const page = "<!doctype html>\n<html>\n<head>\n  <title>T</title>\n%s</head>\n<body>\n  <h1>T</h1>\n</body>\n</html>\n"
	tests := []struct {
		name        string
		files       map[string]string
		instruction string
		want        map[string][]string
		changed     []string
	}{
		{
			name: "rule added",
			files: map[string]string{
				"index.html":   strings.Replace(page, "%s", `  <link rel="stylesheet" href="/css/site.css?v=2">`+"\n", 1),
				"css/site.css": "body { margin: 0 }\n",
			},
			instruction: "make the header tomato",
			want:        map[string][]string{"css/site.css": {"body { margin: 0 }\n\nh1 {\n  color: tomato;\n}\n"}},
			changed:     []string{"css/site.css"},
		},
		{
			name:        "declaration added on one line",
			files:       map[string]string{"index.html": strings.Replace(page, "%s", `<link href="s.css" rel=stylesheet>`, 1), "s.css": "body { margin: 0 }\n"},
			instruction: "make the background #abc",
			want:        map[string][]string{"s.css": {"body { margin: 0; background-color: #abc; }"}},
			changed:     []string{"s.css"},
		},
		{
			name:        "background shorthand with an image is kept",
			files:       map[string]string{"index.html": strings.Replace(page, "%s", `<link rel="stylesheet" href="s.css">`, 1), "s.css": "body {\n  background: url(bread.jpg) #fff;\n}\n"},
			instruction: "make the background wheat",
			want:        map[string][]string{"s.css": {"  background: url(bread.jpg) #fff;\n  background-color: wheat;\n}"}},
			changed:     []string{"s.css"},
		},
		{
			name:        "background shorthand colour is replaced",
			files:       map[string]string{"index.html": strings.Replace(page, "%s", `<link rel="stylesheet" href="s.css">`, 1), "s.css": "/* h1 { } */\nbody {\n  background: #fff;\n}\n"},
			instruction: "make the background wheat",
			want:        map[string][]string{"s.css": {"body {\n  background: wheat;\n}"}},
			changed:     []string{"s.css"},
		},
		{
			name:        "no stylesheet",
			files:       map[string]string{"index.html": strings.Replace(page, "%s", "", 1)},
			instruction: "make the header green",
			want: map[string][]string{
				"style.css":  {"h1 {\n  color: green;\n}\n"},
				"index.html": {"  <title>T</title>\n  <link rel=\"stylesheet\" href=\"style.css\">\n</head>"},
			},
			changed: []string{"index.html", "style.css"},
		},
		{
			name:        "index in a subdirectory, no main",
			files:       map[string]string{"public/index.html": strings.Replace(page, "%s", "", 1), "README.md": "T site\n"},
			instruction: "add a paragraph saying Hello and add a page called Menu",
			want: map[string][]string{
				"public/index.html": {"  <h1>T</h1>\n  <p>Hello</p>\n  <p><a href=\"menu.html\">Menu</a></p>\n</body>"},
				"public/menu.html":  {"<title>Menu – T</title>", "<body>\n  <h1>Menu</h1>\n  <p>This page is new"},
			},
			changed: []string{"public/index.html", "public/menu.html"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := setupFiles(t, tt.files)
			_, changed, err := Edit(dir, tt.instruction)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(changed, tt.changed) {
				t.Errorf("changed = %q, want %q", changed, tt.changed)
			}
			checkFiles(t, dir, tt.want, true)
		})
	}
}
