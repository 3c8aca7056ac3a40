package trimmer

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/dlclark/regexp2"
)

// matchTimeout bounds one regexp2 match (the original set regexp2's global default to this).
const matchTimeout = time.Second

// pattern is one regexp2 expression of the original with what a match cannot do without, so
// that the backtracking engine runs only where a match could start:
//
//   - all and any: lower-cased literals; a match needs every literal in all and, when any is set,
//     at least one in any. Lower-cased because regexp2's IgnoreCase folds with unicode.ToLower, as
//     strings.ToLower does.
//   - line: set for an expression anchored at a line start (^, \A); whether a match can start at
//     this line (its runes, without "\n"). at, the expression anchored with \G, is then run only at
//     such lines.
//   - digits: set for an expression that starts with \d{4}; at runs only where four digits start.
type pattern struct {
	re     *regexp2.Regexp
	at     *regexp2.Regexp
	all    []string
	any    []string
	line   func(line []rune) bool
	digits bool
}

// compile compiles expr with opts and the literal prefilter.
func compile(expr string, opts regexp2.RegexOptions, all, any []string) pattern {
	return pattern{re: mustRegexp2(expr, opts), at: mustRegexp2(`\G(?:`+expr+`)`, opts), all: all, any: any}
}

// leads sets the line condition: once the characters in cut are skipped at its start, the line
// begins with one of prefixes (lower-cased; compared with unicode.ToLower, as regexp2's
// IgnoreCase does). No prefix may begin with a character in cut.
func (p pattern) leads(cut string, prefixes ...string) pattern {
	ps := make([][]rune, len(prefixes))
	for i, pre := range prefixes {
		ps[i] = []rune(pre)
	}
	p.line = func(line []rune) bool {
		i := 0
		for i < len(line) && strings.ContainsRune(cut, line[i]) {
			i++
		}
		for _, pre := range ps {
			if hasLowerPrefix(line[i:], pre) {
				return true
			}
		}
		return false
	}
	return p
}

// hasLowerPrefix reports whether s, lower-cased, begins with pre.
func hasLowerPrefix(s, pre []rune) bool {
	if len(s) < len(pre) {
		return false
	}
	for i, r := range pre {
		if unicode.ToLower(s[i]) != r {
			return false
		}
	}
	return true
}

// holds sets the line condition for a case-sensitive expression that cannot leave the line
// before s: the line holds s.
func (p pattern) holds(s string) pattern {
	rs := []rune(s)
	p.line = func(line []rune) bool {
		for i := range line {
			if slices.Equal(line[i:min(i+len(rs), len(line))], rs) {
				return true
			}
		}
		return false
	}
	return p
}

// fourDigits marks an expression that starts with \d{4}.
func (p pattern) fourDigits() pattern {
	p.digits = true
	return p
}

// possible reports whether the lower-cased input holds the literals a match needs.
func (p pattern) possible(lower string) bool {
	for _, s := range p.all {
		if !strings.Contains(lower, s) {
			return false
		}
	}
	if len(p.any) == 0 {
		return true
	}
	for _, s := range p.any {
		if strings.Contains(lower, s) {
			return true
		}
	}
	return false
}

// match reports whether the pattern matches one line (lower is its lower-cased text, runes its
// runes); a timeout is no match. A line holds no "\n", so an expression anchored at a line start
// can only match at 0.
func (p pattern) match(lower string, runes []rune) bool {
	re := p.re
	if p.line != nil {
		if !p.line(runes) {
			return false
		}
		re = p.at
	}
	if !p.possible(lower) {
		return false
	}
	m, _ := re.FindRunesMatchStartingAt(runes, 0)
	return m != nil
}

// attributionCut is what may stand before an "On … wrote:" line's first word.
const attributionCut = " \t<>-"

// asciiLetters is regexp2's [[:alpha:]].
const asciiLetters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// lit is a shorthand for a list of literals.
func lit(s ...string) []string { return s }

const (
	ci   = regexp2.IgnoreCase | regexp2.RE2
	cims = regexp2.IgnoreCase | regexp2.Singleline | regexp2.Multiline | regexp2.RE2
	cs   = regexp2.RE2
	csm  = regexp2.RE2 | regexp2.Multiline
	cim  = regexp2.IgnoreCase | regexp2.Multiline | regexp2.RE2
)

// Cleanup patterns, run over the whole text.
var (
	pgpMarkers = []pattern{
		compile(`\A-----BEGIN PGP SIGNED MESSAGE-----\n(?:Hash: \w+)?\s+`, ci, lit("-----begin pgp signed message-----"), nil).leads("", "-----begin pgp signed message-----"),
		compile(`^-----BEGIN PGP SIGNATURE-----$[\s\S]+^-----END PGP SIGNATURE-----`, cs, lit("-----begin pgp signature-----", "-----end pgp signature-----"), nil),
	}
	unsubscribe    = compile(`^Unsubscribe: .+@.+(\n.+http:.+)?\s*\z`, ci, lit("unsubscribe: ", "@"), nil)
	alias          = compile(`^.*>{5} "[^"\n]+" == .+ writes:`, cs, lit(`>>>>> "`, " == ", " writes:"), nil)
	enclosedOne    = compile(`^>>> ?(.+) ?>>>$\n([\s\S]+?)\n^<<< ?1 ?<<<$`, cs, lit(">>>", "<<<"), nil)
	enclosedTwo    = compile(`^>{4,}[[:blank:]]*$\n([\s\S]+?)\n^<{4,}[[:blank:]]*$`, csm, lit(">>>>", "<<<<"), nil)
	quotesFormat   = compile(`^((?:[[:blank:]]*[[:alpha:]]*[>|])+)`, csm, nil, lit(">", "|")).leads(" \t"+asciiLetters, ">", "|")
	quoteMarker    = regexp.MustCompile(`([A-Za-z]+>|\|)`) // [[:alpha:]] is ASCII in regexp2
	embeddedBreaks = mustRegexp2(`\n+[[:space:]]*`, cs)
)

// Line patterns. The comments give examples of what each group matches.
var (
	// Envoyé depuis mon iPhone; Von meinem Mobilgerät gesendet; Sent via mobile; Sent with
	// Airmail; <<sent by galaxy>>; (Sent from mobile device); 從我的 iPhone 傳送.
	signatures = []pattern{
		compile(`^[[:blank:]]*從我的 iPhone 傳送`, ci, lit("從我的 iphone 傳送"), nil).leads(" \t", "從我的 iphone 傳送"),
		compile(`^[[:blank:]]*[[:word:]]+ from mobile`, ci, lit(" from mobile"), nil),
		compile(`^[[:blank:]]*[(<]*Sent (from|via|with|by) .+[)>]*`, ci, lit("sent "), nil).leads(" \t(<", "sent "),
		compile(`^[[:blank:]]*From my .{1,20}`, ci, lit("from my "), nil).leads(" \t", "from my "),
		compile(`^[[:blank:]]*Get Outlook for `, ci, lit("get outlook for "), nil).leads(" \t", "get outlook for "),
		compile(`^[[:blank:]]*Envoyé depuis (mon|Yahoo Mail)`, ci, lit(" depuis "), nil).leads(" \t", "envoy"),
		compile(`^[[:blank:]]*Von meinem .+ gesendet`, ci, lit("von meinem ", "gesendet"), nil).leads(" \t", "von meinem "),
		compile(`^[[:blank:]]*Diese Nachricht wurde von .+ gesendet`, ci, lit("diese nachricht wurde von ", "gesendet"), nil).leads(" \t", "diese nachricht wurde von "),
		compile(`^[[:blank:]]*Inviato da `, ci, lit("inviato da "), nil).leads(" \t", "inviato da "),
		compile(`^[[:blank:]]*Sendt fra min `, ci, lit("sendt fra min "), nil).leads(" \t", "sendt fra min "),
		compile(`^[[:blank:]]*Enviado do meu `, ci, lit("enviado do meu "), nil).leads(" \t", "enviado do meu "),
		compile(`^[[:blank:]]*Enviado desde mi `, ci, lit("enviado desde mi "), nil).leads(" \t", "enviado desde mi "),
		compile(`^[[:blank:]]*Verzonden met `, ci, lit("verzonden met "), nil).leads(" \t", "verzonden met "),
		compile(`^[[:blank:]]*Verstuurd vanaf mijn `, ci, lit("verstuurd vanaf mijn "), nil).leads(" \t", "verstuurd vanaf mijn "),
		compile(`^[[:blank:]]*från min `, ci, lit("n min "), nil).leads(" \t", "från min "),
	}
	markdownLink = regexp.MustCompile(`\[([^\]]+)\]\([^)]+\)`)

	// On Wed, Sep 25, 2013, at 03:57 PM, jorge_castro wrote:
	// Le 4 janv. 2016 19:03, "Neil Lalonde" <info@discourse.org> a écrit :
	// El jueves, 21 de noviembre de 2013, codinghorror escribió:
	onDateSomeoneWrote = []pattern{
		compile(`^[[:blank:]<>-]*在 (?:(?!\b(?>在|写道)\b).)+?写道[[:blank:].:>-]*$`, cims, lit("写道"), nil).leads(attributionCut, "在 "),
		compile(`^[[:blank:]<>-]*Op (?:(?!\b(?>Op|het\svolgende\sgeschreven|schreef)\b).)+?(het\svolgende\sgeschreven|schreef[^:]+)[[:blank:].:>-]*$`, cims, lit("op "), lit("geschreven", "schreef")).leads(attributionCut, "op "),
		compile(`^[[:blank:]<>-]*In message (?:(?!\b(?>In message|writes)\b).)+?writes[[:blank:].:>-]*$`, cims, lit("in message ", "writes"), nil).leads(attributionCut, "in message "),
		compile(`^[[:blank:]<>-]*(On|At) (?:(?!\b(?>On|wrote|writes|says|said)\b).)+?(wrote|writes|says|said)[[:blank:].:>-]*$`, cims, nil, lit("wrote", "writes", "says", "said")).leads(attributionCut, "on ", "at "),
		compile(`^[[:blank:]<>-]*Le (?:(?!\b(?>Le|nous\sa\sdit|a\s+écrit)\b).)+?(nous\sa\sdit|a\s+écrit)[[:blank:].:>-`+"\u00a0"+`]*$`, cims, lit("le "), lit("dit", "écrit")).leads(attributionCut, "le "),
		compile(`^[[:blank:]<>-]*Am (?:(?!\b(?>Am|schrieben\sSie)\b).)+?schrieben\sSie[[:blank:].:>-]*$`, cims, lit("am ", "schrieben"), nil).leads(attributionCut, "am "),
		compile(`^[[:blank:]<>-]*Am (?:(?!\b(?>Am|geschrieben)\b).)+?(geschrieben|schrieb[^:]+)[[:blank:].:>-]*$`, cims, lit("am ", "schrieb"), nil).leads(attributionCut, "am "),
		compile(`^[[:blank:]<>-]*Il (?:(?!\b(?>Il|ha\sscritto)\b).)+?ha\sscritto[[:blank:].:>-]*$`, cims, lit("il ", "scritto"), nil).leads(attributionCut, "il "),
		compile(`^[[:blank:]<>-]*(Dnia|Dňa) (?:(?!\b(?>Dnia|Dňa|napisał)\b).)+?napisał(\(a\))?[[:blank:].:>-]*$`, cims, lit("napisał"), lit("dnia ", "dňa ")).leads(attributionCut, "dnia ", "dňa "),
		compile(`^[[:blank:]<>-]*Em (?:(?!\b(?>Em|escreveu)\b).)+?escreveu[[:blank:].:>-]*$`, cims, lit("em ", "escreveu"), nil).leads(attributionCut, "em "),
		compile(`^[[:blank:]<>-]*El (?:(?!\b(?>El|escribió)\b).)+?escribió[[:blank:].:>-]*$`, cims, lit("el ", "escribió"), nil).leads(attributionCut, "el "),
	}

	// Op 10 dec. 2015 18:35 schreef "Arpit Jalan" <info@discourse.org>:
	// Am 18.09.2013 um 16:24 schrieb codinghorror <info@discourse.org>:
	// Den 15. jun. 2016 kl. 20.42 skrev Jeff Atwood <info@discourse.org>:
	// søn. 30. apr. 2017 kl. 00.26 skrev David Taylor <meta@discoursemail.com>:
	onDateWroteSomeone = []pattern{
		onDateWroteSomeoneRegexp("Op", "schreef"),
		onDateWroteSomeoneRegexp("Am", "schrieb"),
		onDateWroteSomeoneRegexp("Den", "skrev"),
		onDateWroteSomeoneRegexp(`søn\.`, "skrev"),
	}

	// суббота, 14 марта 2015 г. пользователь etewiah написал:
	// 23 mar 2017 21:25 "Neil Lalonde" <meta@discoursemail.com> napisał(a):
	// 30 серп. 2016 р. 20:45 "Arpit" no-reply@example.com пише:
	dateSomeoneWrote = []pattern{
		compile(`\d{4}.{1,80}пользователь.{0,80}\n?.{0,80}?написал:`, cs, lit("пользователь", "написал:"), nil).fourDigits(),
		compile(`\d{4}.{1,80}\n?.{0,80}?napisał\(a\):`, cs, lit("napisał(a):"), nil).fourDigits(),
		compile(`\d{4}.{1,80}\n?.{0,80}?пише:`, cs, lit("пише:"), nil).fourDigits(),
	}

	// 2015-10-18 0:17 GMT+03:00 Matt Palmer <info@discourse.org>:
	// вт, 5 янв. 2016 г. в 23:39, Erlend Sogge Heggen <info@discourse.org>:
	dateSomeoneEmail = []pattern{
		compile(`\d{4}.{1,80}\s?<[^@<>]+@[^@<>.]+\.[^@<>]+>:?$`, csm, lit("<", "@", ">"), nil).fourDigits(),
	}

	// Max Mustermann <try_discourse@discoursemail.com> schrieb am Fr., 28. Apr. 2017 um 11:53 Uhr:
	someoneWroteOnDate = []pattern{
		compile(`^.+\bwrote\b[[:space:]]+\bon\b.+[^:]+:`, csm, lit("wrote", "on", ":"), nil).holds("wrote"),
		compile(`^.+\bschrieb\b[[:space:]]+\bam\b.+[^:]+:`, csm, lit("schrieb", "am", ":"), nil).holds("schrieb"),
	}

	// 2016-03-03 17:21 GMT+01:00 Some One
	isoDateSomeone = []pattern{
		compile(`^[[:blank:]>]*20\d\d-\d\d-\d\d \d\d:\d\d GMT\+\d\d:\d\d [\w[:blank:]]+$`, cs, lit(" gmt+"), nil).leads(" \t>", "20"),
	}

	// Some One <info@discourse.org> wrote:
	// Gavin Sinclair (gsinclair@soyabean.com.au) wrote:
	someoneEmailWrote = []pattern{
		compile(`^.+\b[\w.+-]+@[\w.-]+\.\w{2,}\b.+wrote:?$`, cs, lit("@", "wrote"), nil).holds("@"),
	}

	// codinghorror via Discourse Meta wrote:
	// codinghorror via Discourse Meta <info@discourse.org> schrieb:
	someoneViaSomethingWrote = []pattern{
		compile(`^.+ via .+ wrote:?[[:blank:]]*$`, cs, lit(" via ", " wrote"), nil).holds(" via "),
		compile(`^.+ via .+ schrieb:?[[:blank:]]*$`, cs, lit(" via ", " schrieb"), nil).holds(" via "),
	}

	// Posted by mpalmer on 01/21/2016
	postedBySomeoneOnDate = []pattern{
		compile(`^[[:blank:]>]*Posted by .+ on \d{2}\/\d{2}\/\d{4}$`, ci, lit("posted by ", " on "), nil).leads(" \t>", "posted by "),
	}

	// Begin forwarded message:; ----- Original Message -----; *----- Original Message -----*;
	// ----- Reply message -----; ------------------ 原始邮件 ------------------
	forwardedEmail = []pattern{
		compile(`^[[:blank:]>]*Begin forwarded message:`, ci, lit("begin forwarded message:"), nil).leads(" \t>", "begin forwarded message:"),
		compile(`^[[:blank:]>*]*-{2,}[[:blank:]]*(Forwarded|Original|Reply) Message[[:blank:]]*-{2,}`, ci, lit("--", " message"), nil).leads(" \t>*", "--"),
		compile(`^[[:blank:]>]*Début du message transféré :`, ci, lit("but du message transf"), nil).leads(" \t>", "d"),
		compile(`^[[:blank:]>*]*-{2,}[[:blank:]]*Message transféré[[:blank:]]*-{2,}`, ci, lit("--", "message transf"), nil).leads(" \t>*", "--"),
		compile(`^[[:blank:]>*]*-{2,}[[:blank:]]*Ursprüngliche Nachricht[[:blank:]]*-{2,}`, ci, lit("--", "ngliche nachricht"), nil).leads(" \t>*", "--"),
		compile(`^[[:blank:]>*]*-{2,}[[:blank:]]*Mensaje original[[:blank:]]*-{2,}`, ci, lit("--", "mensaje original"), nil).leads(" \t>*", "--"),
		compile(`^[[:blank:]>*]*-{2,}[[:blank:]]*Mensagem original[[:blank:]]*-{2,}`, ci, lit("--", "mensagem original"), nil).leads(" \t>*", "--"),
		compile(`^[[:blank:]>*]*-{2,}[[:blank:]]*原始邮件[[:blank:]]*-{2,}`, ci, lit("--", "原始邮件"), nil).leads(" \t>*", "--"),
	}

	emailHeaders = headerPatterns()
	embedded     = concat(onDateSomeoneWrote, onDateWroteSomeone, dateSomeoneWrote, dateSomeoneEmail,
		someoneWroteOnDate, isoDateSomeone, someoneViaSomethingWrote, someoneEmailWrote,
		postedBySomeoneOnDate, forwardedEmail)
	fixEmbedded = concat(onDateSomeoneWrote, someoneWroteOnDate, dateSomeoneWrote, dateSomeoneEmail)
)

// onDateWroteSomeoneRegexp is the original's ON_DATE_WROTE_SOMEONE form for one language.
func onDateWroteSomeoneRegexp(date, wrote string) pattern {
	expr := fmt.Sprintf(`^[[:blank:]>]*%s\s.+\s%s\s[^:]+:`, date, wrote)
	return compile(expr, cs, lit(wrote, ":"), nil).leads(" \t>", strings.ToLower(strings.ReplaceAll(date, `\`, "")))
}

// headerPatterns is the original's EMAIL_HEADER_REGEXES: "Date:"-like lines with a digit, then
// "From:"-like lines with a word, per language.
func headerPatterns() []pattern {
	dateMarkers := [][]string{
		{"Sendt"}, {"Sent", "Date"}, {"Date", "Le"}, {"Gesendet"}, {"Enviada em"}, {"Enviado"},
		{"Fecha"}, {"Data"}, {"Datum"}, {"Skickat"}, {"发送时间"},
	}
	textMarkers := [][]string{
		{"Fra", "Til", "Emne"},
		{"From", "To", "Cc", "Reply-To", "Subject"},
		{"De", "Expéditeur", "À", "Destinataire", "Répondre à", "Objet"},
		{"Von", "An", "Betreff"},
		{"De", "Para", "Assunto"},
		{"De", "Para", "Asunto"},
		{"Da", "Risposta", "A", "Oggetto"},
		{"Van", "Beantwoorden - Aan", "Aan", "Onderwerp"},
		{"Från", "Till", "Ämne"},
		{"发件人", "收件人", "主题"},
	}
	var out []pattern
	for _, m := range dateMarkers {
		expr := fmt.Sprintf(`^[[:blank:]*]*(?:%s)[[:blank:]*]*:.*\d+`, strings.Join(m, "|"))
		out = append(out, compile(expr, csm, lit(":"), lower(m)).leads(" \t*", lower(m)...))
	}
	for _, m := range textMarkers {
		expr := fmt.Sprintf(`^[[:blank:]*]*(?:%s)[[:blank:]*]*:.*[[:word:]]+`, strings.Join(m, "|"))
		out = append(out, compile(expr, cim, lit(":"), lower(m)).leads(" \t*", lower(m)...))
	}
	return out
}

// lower lower-cases each string.
func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

// concat joins pattern lists.
func concat(lists ...[]pattern) []pattern {
	var out []pattern
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// mustRegexp2 compiles a regexp2 expression with the package's match timeout.
func mustRegexp2(expr string, opts regexp2.RegexOptions) *regexp2.Regexp {
	re := regexp2.MustCompile(expr, opts)
	re.MatchTimeout = matchTimeout
	return re
}
