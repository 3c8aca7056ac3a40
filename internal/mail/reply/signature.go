package reply

import (
	"strings"
)

// stripSignature removes, in order, everything after a "-- " separator, trailing mobile footers
// and a trailing block of contact lines. It returns the remaining text and what was removed.
func stripSignature(lines []string) (text, sig []string) {
	text, sig = cutSigDash(lines)
	text, footer := cutFooters(text)
	text, contact := cutContactBlock(text)
	return text, concat(contact, footer, sig)
}

// concat appends line slices into a new slice.
func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// cutSigDash splits at the first signature separator line ("-- ", or "--" once clients trimmed
// the space).
func cutSigDash(lines []string) (text, sig []string) {
	for i, l := range lines {
		if l == "-- " || strings.TrimSpace(l) == "--" {
			return lines[:i], lines[i:]
		}
	}
	return lines, nil
}

// footerPatterns match a whole mobile or webmail footer line (squashed, link removed).
var footerPatterns = lazy(`^(` + strings.Join([]string{
	`sent from my .{1,60}`,
	`sent (from|via|with|using) (outlook|yahoo mail|mail for windows|windows mail|mailbox|airmail|spark|typeapp|proton ?mail|aol|gmail|the .{1,40} app|samsung|blackberry|mobile|a phone|my phone|mobile device|\[?mail\]? for windows).{0,60}`,
	`\S+ from (mobile|my mobile)`,
	`sent by (galaxy|samsung|my phone|mobile).{0,30}`,
	`sent (from|via|with|using) (the |an? |my )?.{0,40}\b(smartphone|phone|tablet|galaxy|android|handheld)\b.{0,40}`,
	`from my (iphone|ipad|android|phone|mobile|smartphone|samsung|galaxy).{0,30}`,
	`diese nachricht wurde von meinem .{1,60} gesendet\.?`,
	`lähetetty (iphonesta|ipadista|android-puhelimesta|puhelimesta|outlookista|.{1,30}sta)`,
	`(outlook|gmail|.{1,20}) für (ios|android) beziehen`,
	`(從我的|发自我的|來自我的) ?.{1,20}( 傳送| 发送|傳送|发送)?`,
	`(get|télécharger|obtenir|scarica|descargar|baixe|hent|skaffa|pobierz|download) \S+( \S+)? (for|pour|per|para|voor|för|dla|für) (ios|android|iphone|ipad)`,
	`von meinem .{1,40} gesendet`,
	`gesendet (von|mit) .{1,60}`,
	`envoyé (de|depuis) (mon|ma|mon) .{1,40}`,
	`enviado (desde|de) (mi|mi) .{1,40}`,
	`enviado do (meu )?.{1,40}`,
	`envoyé à partir de (mon|ma) .{1,40}`,
	`obter o outlook para (ios|android)`,
	`verzonden vanuit .{1,40}`,
	`.{1,30}ról küldve`,
	`trimis de pe .{1,40}`,
	`στάλθηκε από .{1,40}`,
	`أُ?رسلت من .{1,40}`,
	`inviato da .{1,40}`,
	`verzonden (vanaf|met) .{1,40}`,
	`verstuurd (vanaf|met) .{1,40}`,
	`skickat från .{1,40}`,
	`sendt fra .{1,40}`,
	`wysłane z .{1,40}`,
	`отправлено (с|из) .{1,40}`,
	`.{0,20}iphoneから送信`,
	`please excuse (my )?(brevity|typos)\.?`,
}, "|") + `)$`)

// footerLink is the link Outlook mobile appends to its footer: "Get Outlook for iOS<https://…>".
var footerLink = lazy(`\s*(<https?://[^>]*>|\(\s*https?://[^)]*\)|https?://\S*)\s*$`)

// innerLink is a link in angle brackets inside a footer, where German Outlook puts it: "Outlook
// für iOS<https://aka.ms/o0ukef> beziehen".
var innerLink = lazy(`<https?://[^<>\s]*>`)

// markdownLink is "[text](address)", as HTML-to-text tools write links; the text stays.
var markdownLink = lazy(`\[([^\]]*)\]\([^)]*\)`)

// isFooter reports whether l is a mobile/webmail footer line, also in the bracketed forms some
// clients write ("[Sent from my phone]", "(Sent from Mail)").
func isFooter(l string) bool {
	l = footerLink.ReplaceAllString(strings.TrimSpace(l), "")
	l = innerLink.ReplaceAllString(l, " ")
	l = markdownLink.ReplaceAllString(l, "$1")
	l = strings.TrimSpace(strings.Trim(l, "[]()<>"))
	return footerPatterns.MatchString(squash(l))
}

// cutFooters removes footer lines at the end of the text, repeatedly.
func cutFooters(lines []string) (text, footer []string) {
	cut := len(lines)
	for last := lastNonBlank(lines[:cut]); last >= 0 && isFooter(lines[last]); last = lastNonBlank(lines[:cut]) {
		cut = last
	}
	return lines[:cut], lines[cut:]
}

// contactToken matches what signatures are made of: phone numbers, web and mail addresses.
var contactToken = lazy(`(?i)(https?://\S+|www\.\S+|\S+@\S+\.\S+|\+?\(?\d[\d ()./-]{6,}\d|\b(tel|phone|mobile|mob|fax|cell|t|m|f|p)\b\.?:)`)

// maxContactWords is how many words a contact line may have besides its contact tokens.
const maxContactWords = 5

// isContactLine reports whether l looks like a signature contact line: short, not a list item,
// and made of phone numbers, addresses and "Title | Company" pieces.
func isContactLine(l string) bool {
	t := strings.TrimSpace(l)
	if t == "" || len(t) > 90 || strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") {
		return false
	}
	rest := contactToken.ReplaceAllString(t, " ")
	if rest == t && !strings.Contains(t, " | ") {
		return false
	}
	return len(strings.Fields(strings.ReplaceAll(rest, "|", " "))) <= maxContactWords
}

// minContactLines and maxContactLines bound how many trailing contact lines make a signature
// block; a longer run is content (a list of links, say).
const (
	minContactLines = 2
	maxContactLines = 8
)

// cutContactBlock removes a trailing run of contact lines, unless nothing comes before it or the
// line before it introduces them ("Please link these pages:").
func cutContactBlock(lines []string) (text, block []string) {
	end := lastNonBlank(lines)
	start := end
	for start >= 0 && end-start <= maxContactLines && isContactLine(lines[start]) {
		start--
	}
	if n := end - start; n < minContactLines || n > maxContactLines {
		return lines, nil
	}
	if prev := lastNonBlank(lines[:start+1]); prev < 0 || strings.HasSuffix(strings.TrimSpace(lines[prev]), ":") {
		return lines, nil
	}
	return lines[:start+1], lines[start+1:]
}
