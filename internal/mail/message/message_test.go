package message_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/mail/message"
)

// parseFile parses testdata/name and fails the test on error.
func parseFile(t *testing.T, name string) *message.Message {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := message.Parse(raw)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return msg
}

// att is the expected shape of one attachment.
type att struct {
	name, ctype string
	inline      bool
}

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file        string
		from        message.Address
		subject     string
		textHas     []string // substrings of Text
		textHasNot  []string
		attachments []att
		problems    bool // whether Problems must be non-empty
	}{
		{
			file:    "gmail_alternative.eml",
			from:    message.Address{Name: "Ana López", Addr: "ana.lopez@gmail.com"},
			subject: "Re: Your site is live",
			textHas: []string{`tagline to "Pan recién hecho".`, "Gracias,\nAna", "> Reply to this email"},
		},
		{
			file:        "outlook_mixed_image.eml",
			from:        message.Address{Name: "Brandt, Klaus", Addr: "kbrandt@brandt-bau.de"},
			subject:     "AW: Ihre Website",
			textHas:     []string{"Bitte das angehängte Foto", "Grüße", "-----Ursprüngliche Nachricht-----"},
			attachments: []att{{"Baustelle Titelbild.jpg", "image/jpeg", false}},
		},
		{
			file:        "apple_mail_inline_image.eml",
			from:        message.Address{Name: "Marie Dupont", Addr: "marie@dupont-fleurs.fr"},
			subject:     "Nouveau logo à mettre",
			textHas:     []string{"en haut à gauche ?", "Merci,\nMarie"},
			textHasNot:  []string{"<html"},
			attachments: []att{{"logo.png", "image/png", true}},
		},
		{
			file:        "apple_mail_mixed_inline.eml",
			from:        message.Address{Name: "Ana Lopez", Addr: "ana@anas-bakery.com"},
			subject:     "Gallery",
			textHas:     []string{"first in the gallery:", "and this one second:"},
			textHasNot:  []string{"\n--\n"},
			attachments: []att{{"croissants.png", "image/png", true}, {"bread.png", "image/png", true}},
		},
		{
			file:       "html_only.eml",
			from:       message.Address{Name: "Sam Okafor", Addr: "sam@okafor-legal.com"},
			subject:    "RE: Draft ready",
			textHas:    []string{"remove the “Careers” page & add our phone", "> Your draft is ready."},
			textHasNot: []string{"<div>", "&amp;", "margin:0"},
			problems:   true, // enmime notes the missing plain part
		},
		{
			file:    "thunderbird_latin1.eml",
			from:    message.Address{Name: "Gérard Lefèvre", Addr: "gerard@boulangerie-lefevre.fr"},
			subject: "Re\u00a0: Votre site est en ligne",
			textHas: []string{"bleu foncé ?", "« Spécialités »", "À bientôt,"},
		},
		{
			file:        "ios_base64_heic.eml",
			from:        message.Address{Name: "Jo Park", Addr: "jo@parkstudio.co"},
			subject:     "Photo",
			textHas:     []string{"About page? 📸", "Sent from my iPhone"},
			attachments: []att{{"IMG_4821.HEIC", "image/heic", true}},
		},
		{
			file:    "forward_rfc822.eml",
			from:    message.Address{Name: "Office", Addr: "office@chen-dental.com"},
			subject: "Fwd: Opening hours",
			textHas: []string{"See the attached mail from Lee"},
			// the forwarded mail's own text stays inside the attachment
			textHasNot: []string{"opening hours on the site"},
			attachments: []att{
				{"Opening hours.eml", "message/rfc822", false},
				{"attachment-2.eml", "message/rfc822", false},
			},
		},
		{
			file:    "outlook_cp1252.eml",
			from:    message.Address{Name: "Dana Whitfield", Addr: "dana@whitfield-cafe.com"},
			subject: "Prices",
			textHas: []string{"Change “Latte” to €4.50 – and the “Café au lait” to €4.00."},
		},
		{
			file:    "rfc2231_names.eml",
			from:    message.Address{Addr: "menu@example.com"},
			subject: "menus",
			textHas: []string{"Menus attached."},
			attachments: []att{
				{"carte café.pdf", "application/pdf", false},
				{"Speisekarte München.pdf", "application/pdf", false},
				{"attachment-3.pdf", "application/pdf", false},
				{"日本語メニュー.pdf", "application/pdf", false},
			},
		},
		{
			file:        "malformed_boundary.eml",
			from:        message.Address{Addr: "broken@example.com"},
			subject:     "Hello world",
			textHas:     []string{"Make the footer grey"},
			attachments: []att{{"attachment-1.png", "image/png", false}},
			problems:    true,
		},
		{
			// The label says Big5, the bytes are UTF-8: read as Big5 they turn to noise.
			file:     "mislabeled_big5.eml",
			from:     message.Address{Name: "林小姐", Addr: "lin@tea-house.example"},
			subject:  "營業時間",
			textHas:  []string{"請把營業時間改成週一到週五，早上九點開門。", "謝謝，\n林小姐"},
			problems: true, // says the label was not believed
		},
		{
			file:       "mislabeled_latin1.eml",
			from:       message.Address{Name: "Jürgen Weiß", Addr: "juergen@baeckerei-weiss.example"},
			subject:    "Oeffnungszeiten",
			textHas:    []string{"Bitte die Öffnungszeiten ändern: Montag bis Freitag 8–18 Uhr.", "Grüße,\nJürgen"},
			textHasNot: []string{"Ã"},
			problems:   true,
		},
		{
			// multipart/alternative whose body has no parts at all: the body is the text.
			file:       "alternative_no_parts.eml",
			from:       message.Address{Name: "Sam Okafor", Addr: "sam@okafor-legal.example"},
			subject:    "Re: Your site is live",
			textHas:    []string{"Please move the contact form to the top of the page.", "> Your site is live."},
			textHasNot: []string{"--000000000000a1b2c3d4e5f6"}, // the terminator shape closes it with
			problems:   true,
		},
		{
			// A client put the text before the first part, where only non-MIME readers look.
			file:        "text_in_preamble.eml",
			from:        message.Address{Name: "Jo Park", Addr: "jo@parkstudio.example"},
			subject:     "New photo",
			textHas:     []string{"Please put the attached photo on the About page."},
			textHasNot:  []string{"MIME format"},
			attachments: []att{{"about.png", "image/png", false}},
			problems:    true,
		},
		{
			// Only the MIME notice before the part: no text, and the notice is no instruction.
			file:        "attachment_only.eml",
			from:        message.Address{Name: "Jo Park", Addr: "jo@parkstudio.example"},
			subject:     "New photo",
			textHasNot:  []string{"MIME format"},
			attachments: []att{{"about.png", "image/png", false}},
		},
		{
			// The header declares one boundary, the body uses another.
			file:        "wrong_boundary.eml",
			from:        message.Address{Name: "Lee Chen", Addr: "lee@chen-dental.example"},
			subject:     "Team photo",
			textHas:     []string{"Please replace the team photo with the attached one."},
			textHasNot:  []string{"--actual-boundary-42", "Content-Type"},
			attachments: []att{{"team.png", "image/png", false}},
			problems:    true,
		},
		{
			file:    "auto_reply.eml",
			from:    message.Address{Name: "Ana Lopez", Addr: "ana@anas-bakery.com"},
			subject: "Automatic reply: Your site is live",
			textHas: []string{"out of the office"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			msg := parseFile(t, tt.file)
			if msg.From != tt.from {
				t.Errorf("From = %+v, want %+v", msg.From, tt.from)
			}
			if msg.Subject != tt.subject {
				t.Errorf("Subject = %q, want %q", msg.Subject, tt.subject)
			}
			checkText(t, msg.Text, tt.textHas, tt.textHasNot)
			checkAttachments(t, msg.Attachments, tt.attachments)
			if got := len(msg.Problems) > 0; got != tt.problems {
				t.Errorf("Problems = %q, want non-empty: %v", msg.Problems, tt.problems)
			}
		})
	}
}

// checkText asserts Text contains every has and none of hasNot.
func checkText(t *testing.T, text string, has, hasNot []string) {
	t.Helper()
	for _, s := range has {
		if !strings.Contains(text, s) {
			t.Errorf("Text lacks %q:\n%s", s, text)
		}
	}
	for _, s := range hasNot {
		if strings.Contains(text, s) {
			t.Errorf("Text contains %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "\r") {
		t.Errorf("Text has a carriage return")
	}
}

// checkAttachments asserts names, types, inline flags and non-empty data, in order.
func checkAttachments(t *testing.T, got []message.Attachment, want []att) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d attachments %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.ContentType != w.ctype || g.Inline != w.inline {
			t.Errorf("attachment %d = {%q %q inline=%v}, want %+v", i, g.Name, g.ContentType, g.Inline, w)
		}
		if len(g.Data) == 0 {
			t.Errorf("attachment %d (%s) has no data", i, g.Name)
		}
	}
}

func TestParseHeaders(t *testing.T) {
	t.Parallel()
	msg := parseFile(t, "gmail_alternative.eml")
	if want := "CAH7xQ9kZ+1aB2cD3eF4gH5iJ6kL7mN8oP9qR0sT1uV2wX3yZ4@mail.gmail.com"; msg.MessageID != want {
		t.Errorf("MessageID = %q, want %q", msg.MessageID, want)
	}
	if want := "20250106150200.abc123@webordinary.com"; msg.InReplyTo != want {
		t.Errorf("InReplyTo = %q", msg.InReplyTo)
	}
	if len(msg.References) != 1 || msg.References[0] != msg.InReplyTo {
		t.Errorf("References = %q", msg.References)
	}
	if want := time.Date(2025, 1, 6, 15, 15, 42, 0, time.UTC); !msg.Date.Equal(want) {
		t.Errorf("Date = %v, want %v", msg.Date, want)
	}
	if got := msg.Header("dkim-signature"); !strings.HasPrefix(got, "v=1; a=rsa-sha256") {
		t.Errorf(`Header("dkim-signature") = %q`, got)
	}
	if got := msg.Headers["Authentication-Results"]; len(got) != 1 || !strings.Contains(got[0], "dkim=pass") {
		t.Errorf("Authentication-Results = %q", got)
	}
	if msg.HTML == "" || len(msg.To) != 1 || msg.To[0].Addr != "site@webordinary.com" {
		t.Errorf("HTML empty or To = %+v", msg.To)
	}
}

func TestParseAutoHeaders(t *testing.T) {
	t.Parallel()
	msg := parseFile(t, "auto_reply.eml")
	for name, want := range map[string]string{
		"Auto-Submitted":           "auto-replied",
		"Precedence":               "bulk",
		"List-Id":                  "Bakery news <news.anas-bakery.com>",
		"X-Auto-Response-Suppress": "All",
	} {
		if got := msg.Header(name); got != want {
			t.Errorf("Header(%q) = %q, want %q", name, got, want)
		}
	}
	want := []message.Address{{Addr: "noreply@anas-bakery.com"}, {Name: "Ana L.", Addr: "ana+replies@anas-bakery.com"}}
	if len(msg.ReplyTo) != 2 || msg.ReplyTo[0] != want[0] || msg.ReplyTo[1] != want[1] {
		t.Errorf("ReplyTo = %+v, want %+v", msg.ReplyTo, want)
	}
}

func TestParseCc(t *testing.T) {
	t.Parallel()
	msg := parseFile(t, "outlook_mixed_image.eml")
	want := []message.Address{{Name: "Petra Brandt", Addr: "petra@brandt-bau.de"}, {Addr: "office@brandt-bau.de"}}
	if len(msg.Cc) != 2 || msg.Cc[0] != want[0] || msg.Cc[1] != want[1] {
		t.Errorf("Cc = %+v, want %+v", msg.Cc, want)
	}
}

func TestParseMalformedProblems(t *testing.T) {
	t.Parallel()
	msg := parseFile(t, "malformed_boundary.eml")
	if !msg.Date.IsZero() {
		t.Errorf("Date = %v, want zero for an unparseable date", msg.Date)
	}
	if msg.MessageID != "broken-id@example.com" {
		t.Errorf("MessageID = %q", msg.MessageID)
	}
	joined := strings.Join(msg.Problems, "\n")
	for _, want := range []string{"Date header", "Boundary", "Base64"} {
		if !strings.Contains(joined, want) {
			t.Errorf("Problems lack %q:\n%s", want, joined)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
	}{
		{"empty", ""},
		{"whitespace", " \r\n\t\n"},
		{"no header colon", "\x00\x01\x02 not a header\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg, err := message.Parse([]byte(tt.raw))
			if !errors.Is(err, message.ErrMalformed) {
				t.Fatalf("Parse = %+v, %v; want ErrMalformed", msg, err)
			}
		})
	}
}

func TestParseBestEffort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, text string
		problems        bool
	}{
		{"no content type", "Subject: hi\n\nmake it blue\n", "make it blue\n", false},
		{"garbage content type", "Subject: hi\nContent-Type: ;;;\n\nmake it blue\n", "make it blue\n", true},
		{"multipart without boundary", "Subject: hi\nContent-Type: multipart/mixed\n\nmake it blue\n", "make it blue\n", true},
		{"empty boundary", "Subject: hi\nContent-Type: multipart/mixed; boundary=\"\"\n\n--\nmake it blue\n", "--\nmake it blue\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg, err := message.Parse([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if msg.Subject != "hi" || msg.Text != tt.text {
				t.Errorf("got Subject %q Text %q, want %q", msg.Subject, msg.Text, tt.text)
			}
			if got := len(msg.Problems) > 0; got != tt.problems {
				t.Errorf("Problems = %q, want non-empty: %v", msg.Problems, tt.problems)
			}
		})
	}
}

func TestParseManyParts(t *testing.T) {
	t.Parallel()
	raw := "Subject: many\nContent-Type: multipart/mixed; boundary=b\n\n" +
		strings.Repeat("--b\nContent-Type: text/plain\n\nhello\n", 3000) + "--b--\n"
	start := time.Now()
	msg, err := message.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Parse took %v", elapsed)
	}
	if got := strings.Count(msg.Text, "hello"); got != 1000 {
		t.Errorf("Text has %d parts, want the first 1000", got)
	}
	if !strings.Contains(strings.Join(msg.Problems, "\n"), "MIME parts") {
		t.Errorf("Problems = %q, want a truncation note", msg.Problems)
	}
}
