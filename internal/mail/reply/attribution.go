package reply

import (
	"strings"
)

// attributionPatterns match a whole (squashed, possibly joined) attribution line in the languages
// mail clients write them in. \b is ASCII-only in Go, so non-Latin words are preceded by \s.
var attributionPatterns = []*lazyRE{
	lazy(`^on\b.{3,250}\bwrote ?:$`),                                       // English
	lazy(`^am\b.{3,250}\bschrieb\b.{0,250}:$`),                             // German
	lazy(`^.{3,250}\sschrieb am\s.{3,250}:$`),                              // German, name first (Gmail)
	lazy(`^le\b.{3,250}\ba écrit ?:$`),                                     // French
	lazy(`^el\b.{3,250}\bescribió ?:$`),                                    // Spanish
	lazy(`^(il|in data)\b.{3,250}\bha scritto ?:$`),                        // Italian
	lazy(`^op\b.{3,250}\b(schreef\b.{0,250}|het volgende geschreven) ?:$`), // Dutch
	lazy(`^(em|no dia)\b.{3,250}\bescreveu ?:$`),                           // Portuguese
	lazy(`^pe\b.{3,250}\ba scris ?:$`),                                     // Romanian
	lazy(`^.{3,250}\sέγραψε ?:$`),                                          // Greek
	lazy(`^(في|فى)\s.{3,250}\sكتب.{0,60}:$`),                               // Arabic
	lazy(`^(den\b|på\s).{3,250}\bskrev\b.{0,250}:$`),                       // Swedish, Danish, Norwegian
	lazy(`^w dniu\b.{3,250}\bpisze ?:$`),                                   // Polish (Thunderbird)
	lazy(`^wiadomość napisana przez\b.{3,250}:$`),                          // Polish (Apple Mail)
	lazy(`^.{3,250}\bnapisał(\(a\)|a)? ?:$`),                               // Polish (Gmail)
	lazy(`^.{3,250}\s(написал(\(а\)|а)?|пишет) ?:$`),                       // Russian
	lazy(`^.{1,250}に.{1,250}が書きました ?[:：]$`),                                // Japanese (Thunderbird)
	lazy(`^.{1,250}(写道|寫道) ?[:：]$`),                                        // Chinese
	lazy(`^.{1,250}のメール ?[:：]$`),                                           // Japanese (Apple Mail)
	lazy(`^.{3,250}\bkirjoitti ?:$`),                                       // Finnish
	lazy(`^.{3,250}\b(napsal|napsala|napsal\(a\)) ?:$`),                    // Czech
	lazy(`^.{3,250}\byazdı ?:$`),                                           // Turkish
	lazy(`^.{3,250}\s(írta|írt) ?:$`),                                      // Hungarian
	lazy(`^.{1,120}\bwrote ?:$`),                                           // "Name wrote:"
}

// genericAttribution is an unknown-language attribution: an address and a closing colon. It only
// counts when a quote block follows.
var genericAttribution = lazy(`^.{0,200}\S+@\S+.{0,60}[:：]$`)

// strongHint marks an attribution that is unmistakable even without a quote block after it: it
// carries an address, a time, a year or a numeric date. "On Jan 6 you wrote:" written by the
// person themselves has none of these.
var strongHint = lazy(`@|\d{1,2}[:.h]\d{2}\b|\b(19|20)\d{2}\b|\d{1,2}/\d{1,2}/\d{2,4}`)

// maxAttributionLines is how many lines an attribution may be wrapped over.
const maxAttributionLines = 3

// attribution reports how many lines (0 if none) the attribution starting at i spans, and whether
// it is strong enough to start history without a quote block after it.
func attribution(lines []string, i int) (n int, strong bool) {
	joined := ""
	for n = 1; n <= maxAttributionLines && i+n <= len(lines); n++ {
		l := lines[i+n-1]
		if isBlankLine(l) || isQuoted(l) {
			return 0, false
		}
		if len(l) > maxAttributionLen {
			return 0, false
		}
		joined = strings.TrimSpace(joined + " " + squash(l))
		if matched, strong := matchAttribution(joined); matched {
			if n > 1 && startsLater(lines, i, n) {
				return 0, false
			}
			return n, strong
		}
	}
	return 0, false
}

// maxAttributionLen bounds the joined attribution, so that long lines cost no regexp work.
const maxAttributionLen = 400

// matchAttribution checks one candidate attribution line. Every attribution ends with a colon,
// which is checked first because it is cheap.
func matchAttribution(l string) (matched, strong bool) {
	if len(l) > maxAttributionLen {
		return false, false
	}
	if dashedAttribution.MatchString(l) || bareAttribution.MatchString(l) {
		return true, true
	}
	if !(strings.HasSuffix(l, ":") || strings.HasSuffix(l, "：")) {
		return false, false
	}
	if dateAttribution.MatchString(l) {
		return true, true
	}
	for _, p := range attributionPatterns {
		if p.MatchString(l) {
			return true, strongHint.MatchString(l)
		}
	}
	return genericAttribution.MatchString(l), false
}

// inlineAttribution is an attribution with the quoted text run onto the same line, as Yahoo's
// HTML-to-text output produces: "On Mon, … <a@b.c> wrote:   Your site is live."
var inlineAttribution = lazy(`^on\b.{3,200}@.{1,200}\bwrote:\s+\S`)

// isInlineAttribution reports whether l is such a run-on attribution.
func isInlineAttribution(l string) bool {
	return inlineAttribution.MatchString(squash(l))
}

// dashedAttribution is the Zoho and Yahoo form without a colon: "---- On … wrote ----".
var dashedAttribution = lazy(`^-{2,}\s*on\b.{3,250}\bwrote\s*-{2,}$`)

// bareAttribution is an English attribution that lost its colon but carries a date and an
// address: "On Wed, 14 Nov 2018 08:14:43 -0200 John Doe <john@doe.com> wrote".
var bareAttribution = lazy(`^on\b.{3,250}@.{1,250}\bwrote$`)

// dateAttribution is an attribution in no particular language: a date or time and an address,
// ending in a colon ("2017-11-24 16:32 GMT+01:00 Name <a@b.c>:", "ср, 30 апр. 2025 г. в 15:19,
// Name <a@b.c>:"). It needs both a numeric date or time and an address in angle brackets.
var dateAttribution = lazy(`^.{0,120}(\d{1,4}[-/.]\d{1,2}[-/.]\d{2,4}|\d{1,2}[:.]\d{2}).{0,160}<[^<>\s]+@[^<>\s]+>\s*[:：]$`)

// startsLater reports whether the attribution found over lines[i:i+n] is really one that starts
// on a later line, with the line at i being the person's own last line written directly above it
// (Android Gmail leaves no blank line there). A later line that opens like an attribution ("On
// …", a numeric date) takes its place; any later line does when the lines above it neither open
// like one nor carry a date, time or address ("Thanks" / "Name schrieb am …:"), so the wrapped
// "20 окт. 2016 г. 19:37 … <" / "addr> написал:" stays whole.
func startsLater(lines []string, i, n int) bool {
	opens := opensAttribution(lines[i])
	for j := i + 1; j < i+n; j++ {
		if !opensAttribution(lines[j]) && (opens || strongHint.MatchString(squash(strings.Join(lines[i:j], " ")))) {
			continue
		}
		if m, _ := attribution(lines[:i+n], j); m > 0 && j+m == i+n {
			return true
		}
	}
	return false
}

// opensAttribution reports whether l opens like an attribution: with an opener word or a
// numeric date.
func opensAttribution(l string) bool {
	sq := squash(l)
	return attributionOpener.MatchString(sq) || leadingDate.MatchString(sq)
}

// leadingDate matches a line that opens with a numeric date, as attributions in several
// languages do ("02.04.2012 14:20 пользователь … написал:", "2012/4/2 Name <a@b.c>:").
var leadingDate = lazy(`^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}\b`)

// attributionOpener matches the words an attribution line starts with in the languages whose
// attribution leads with them ("On …", "Am …", "Le …").
var attributionOpener = lazy(`^((on|am|le|el|il|in data|op|em|no dia|pe|den|w dniu|dnia|wiadomość napisana przez)\b|på\s|(في|فى)\s)`)

// splitRunOn splits a line that carries the person's last words and an attribution run on
// behind them ("reply On Wed, Apr 4, 2012 at 3:59 PM, bob@example.com wrote:", "bla--- On …
// wrote:") into the two lines, when a quote block follows. The attribution must be strong (an
// address, a time or a year), so a sentence that mentions "on … wrote:" stays whole. It also
// returns the person's words split off (normalized), which are content whatever the coarse pass says.
func splitRunOn(lines []string) ([]string, map[string]bool) {
	var out []string
	content := make(map[string]bool)
	for i, l := range lines {
		if isQuoted(l) {
			out = append(out, l) // "> On … wrote:" is a quoted attribution, not the person's words
			continue
		}
		if text, attr, ok := runOn(l); ok && quoteFollows(lines, i+1) && !inAttribution(lines, i) {
			out = append(out, text, attr)
			content[normalize(text)] = true
			continue
		}
		out = append(out, l)
	}
	return out, content
}

// runOn finds an attribution that starts after a word boundary inside l and ends the line.
func runOn(l string) (text, attr string, ok bool) {
	t := strings.TrimSpace(l)
	if !strings.HasSuffix(t, ":") && !strings.HasSuffix(t, "：") || len(t) > maxAttributionLen {
		return "", "", false
	}
	if m, _ := matchAttribution(squash(t)); m && attributionOpener.MatchString(squash(t)) {
		return "", "", false // the whole line is one ("On … at 10:02 AM Name wrote:")
	}
	for k := len(t) - 1; k > 0; k-- { // the shortest attribution: "… On Tue …" inside wins
		if t[k-1] != ' ' && t[k-1] != '-' || t[k] == ' ' || t[k] == '-' {
			continue
		}
		if sq := squash(t[k:]); attributionOpener.MatchString(sq) && languageAttribution(sq) {
			text = strings.TrimRight(t[:k], " -")
			return text, t[k:], text != ""
		}
	}
	return "", "", false
}

// languageAttribution reports whether sq is a strong attribution in one of the languages whose
// attribution leads with an opener word ("On …", "Am …"), not the bare "Name wrote:" form.
func languageAttribution(sq string) bool {
	if !strongHint.MatchString(sq) {
		return false
	}
	if dashedAttribution.MatchString(sq) || bareAttribution.MatchString(sq) {
		return true
	}
	for _, p := range attributionPatterns[:len(attributionPatterns)-1] {
		if p.MatchString(sq) {
			return true
		}
	}
	return false
}

// quoteFollows reports whether the next non-blank line from i on is quoted.
func quoteFollows(lines []string, i int) bool {
	j := nextNonBlank(lines, i)
	return j < len(lines) && isQuoted(lines[j])
}

// inAttribution reports whether line i is the rest of an attribution wrapped from a line above
// that opens like one ("On …", "Am …"). Without an opener above, a line above that ends in
// "wrote:" only because line i does is the person's text ("reply" / "bla--- On … wrote:").
func inAttribution(lines []string, i int) bool {
	for j := max(0, i-maxAttributionLines+1); j < i; j++ {
		if !attributionOpener.MatchString(squash(lines[j])) {
			continue
		}
		if n, _ := attribution(lines, j); n > 0 && j+n > i {
			return true
		}
	}
	return false
}

// colonless reports whether line i is a strong attribution that lost its closing colon ("Am
// 20.06.24 um 16:20 schrieb Name") directly above earlier mail: a quote or a header line.
func colonless(lines []string, i int) bool {
	sq := squash(lines[i])
	if sq == "" || strings.HasSuffix(sq, ":") || strings.HasSuffix(sq, "：") || len(sq) > maxAttributionLen {
		return false
	}
	if i+1 >= len(lines) || !isQuoted(lines[i+1]) && !isHeaderLabel(label(lines[i+1])) {
		return false
	}
	if !attributionOpener.MatchString(sq) {
		return false
	}
	m, strong := matchAttribution(sq + ":")
	return m && strong
}
