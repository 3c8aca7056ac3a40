package demo

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// SummaryPrefix starts the demo agent's summary, so that nobody takes it for an AI.
const SummaryPrefix = "Demo agent (literal edits, not AI): "

// Can lists, on one line, what the demo agent can do.
const Can = "replace OLD with NEW [in FILE]; set the title to TEXT; set the heading to TEXT; " +
	"make the header COLOUR; make the background COLOUR; add a paragraph saying TEXT; " +
	"add a page called NAME"

// Help documents the edit language, for the terminal and for a refused instruction.
const Help = `The demo agent (literal edits, not AI) understands one edit per sentence or line:
  replace OLD with NEW           in every .html, .md, .css and .txt file of the site
  replace OLD with NEW in FILE   in one file, e.g. in about.html
  set the title to TEXT          the <title> of index.html (and its <h1> if it showed the title)
  set the heading to TEXT        the first <h1> of index.html (also: change the header to TEXT)
  make the header COLOUR         the heading's colour, e.g. green or #2e7d32
  make the background COLOUR     the page background
  add a paragraph saying TEXT    a new paragraph at the end of index.html
  add a page called NAME         a new page in the same layout, linked from index.html
Join edits with "and" or write one per sentence. Put text in quotes ("...") when it contains
a full stop or "and" followed by another edit.`

var (
	// ErrNotUnderstood means a sentence of the instruction is not in the edit language. Its
	// message lists what the demo agent can do.
	ErrNotUnderstood = errors.New("the demo agent only does literal edits: " + Can)
	// ErrUnsafePath means an edit named a file outside the site, a hidden file or a symbolic
	// link.
	ErrUnsafePath = errors.New("the demo agent only edits regular files inside the site")
	// ErrNotFound means what an edit needs is not in the site: the text to replace, a file,
	// index.html or its <h1>.
	ErrNotFound = errors.New("not found")
	// ErrExists means a page to add already exists.
	ErrExists = errors.New("already exists")
)

// maxInstruction bounds the instruction the demo agent reads.
const maxInstruction = 64 << 10

// verbs start an edit; a separator followed by one of them starts a new edit in a sentence.
// The list is wider than the language, so that "… and delete the menu" is refused rather than
// taken as part of a value.
const verbs = `(?:replace\s|change\s+["“'‘]|(?:set|change|make|add|create|update|turn|insert|append|put|` +
	`remove|delete|fix|move|rename|hide|show|use|swap|translate)\s+(?:the|a|an|another|new|all|my|our|this|that|some)\s)`

var (
	separator      = regexp.MustCompile(`(?i)(?:\s*[,;]\s*(?:(?:and\s+then|and\s+also|and|then|also|plus)\s+)?|\s+(?:and\s+then|and\s+also|and|then|also|plus)\s+)(?:(?:please|kindly)\s+)?(` + verbs + `)`)
	startsWithVerb = regexp.MustCompile(`(?i)^\W*(?:(?:please|kindly|could\s+you|can\s+you)\s+)*` + verbs)
	hello          = regexp.MustCompile(`(?i)^(?:hi|hello|hey|dear|good\s+(?:morning|afternoon|evening))\b`)
	signOff        = regexp.MustCompile(`(?i)^(?:thanks|thank\s+you|many\s+thanks|cheers|regards|best|kind\s+regards|best\s+regards|warm\s+regards|all\s+the\s+best|sincerely|thx|ta|bye)\b`)
	anyVerb        = regexp.MustCompile(`(?i)\b(?:replace|set|change|make|add|create|update|turn|insert|append|put|remove|delete|fix|move|rename|hide|show|use|swap|translate)\b`)
	greeting       = regexp.MustCompile(`(?i)^(?:hi|hello|hey|dear)\b[^,:;!.]{0,40}[,:!]\s*`)
	leadFiller     = regexp.MustCompile(`(?i)^(?:please|pls|kindly|could\s+you|can\s+you|would\s+you(?:\s+mind)?|will\s+you|i[’']?d\s+like\s+(?:you\s+)?to|i\s+would\s+like\s+(?:you\s+)?to|i\s+want\s+(?:you\s+)?to|we[’']?d\s+like\s+(?:you\s+)?to|go\s+ahead\s+and|and|also|then|now|next|finally|first(?:ly)?|lastly|just|ok(?:ay)?|so)(?:\s+|[,:]\s*|$)`)
	tailFiller     = regexp.MustCompile(`(?i)(?:[\s,]+(?:please|thanks|thank\s+you(?:\s+so\s+much)?|thanks\s+a\s+lot|for\s+me|if\s+you\s+can|if\s+possible|if\s+you\s+could))+[\s.!?,;:]*$`)
	tailPunct      = regexp.MustCompile(`[\s.!?,;:]+$`)
)

// clause is one edit as the owner wrote it, and what it means.
type clause struct {
	text string
	edit edit
}

// parse reads an instruction into edits. Every sentence must be understood: otherwise the
// error (ErrNotUnderstood) quotes the parts that were not, and why when it is known.
func parse(instruction string) ([]clause, error) {
	var out []clause
	var unknown []string
	for _, sentence := range sentences(instruction) {
		for _, text := range clauses(sentence) {
			c, problem := parseClause(text)
			switch {
			case problem != "":
				unknown = append(unknown, problem)
			case c.edit != nil:
				out = append(out, c)
			}
		}
	}
	return out, notUnderstood(unknown, len(out))
}

// parseClause reads one clause. A clause of filler alone gives a zero clause; one that is not
// understood gives a problem: the clause, quoted, and why when it is known.
func parseClause(text string) (c clause, problem string) {
	text = strings.TrimSpace(text)
	cleaned, end := clean(text)
	if cleaned == "" || isCourtesy(text) {
		return clause{}, ""
	}
	e, why := match(cleaned, end)
	switch {
	case why != "":
		return clause{}, quote(text) + " (" + why + ")"
	case e == nil:
		return clause{}, quote(text)
	}
	return clause{text: text, edit: e}, ""
}

func notUnderstood(unknown []string, understood int) error {
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("demo: did not understand %s: %w", strings.Join(unknown, ", "), ErrNotUnderstood)
	case understood == 0:
		return fmt.Errorf("demo: found no edit in the instruction: %w", ErrNotUnderstood)
	}
	return nil
}

// sentences splits an instruction into sentences: lines, then full stops, question and
// exclamation marks and semicolons followed by a space, outside quotes. Quoted reply lines
// are skipped; the signature and the platform's list of attachments end the instruction.
func sentences(instruction string) []string {
	var out []string
	for _, line := range instructionLines(instruction) {
		out = append(out, splitSentences(line)...)
	}
	return out
}

func instructionLines(instruction string) []string {
	lines := strings.Split(strings.ReplaceAll(instruction, "\r\n", "\n"), "\n")
	var out []string
	for i, line := range lines {
		line = strings.TrimSpace(line)
		switch {
		case endsInstruction(line), isSignOff(line) && !verbAfter(lines[i+1:]):
			return out
		case line == "", strings.HasPrefix(line, ">"), strings.HasPrefix(strings.ToLower(line), "sent from my "):
			continue
		}
		out = append(out, line)
	}
	return out
}

// endsInstruction is true for a signature delimiter, a reply's attribution line and the
// list of attachments the pipeline appends.
func endsInstruction(line string) bool {
	return line == "--" || strings.HasPrefix(line, "Attached files (") ||
		(strings.HasPrefix(line, "On ") && strings.HasSuffix(line, "wrote:"))
}

// isSignOff is a line like "Thanks," or "Best regards, Alice": the lines after it are a
// signature.
func isSignOff(line string) bool {
	return signOff.MatchString(line) && !anyVerb.MatchString(line)
}

func verbAfter(lines []string) bool {
	for _, l := range lines {
		if startsWithVerb.MatchString(l) {
			return true
		}
	}
	return false
}

func isCourtesy(sentence string) bool {
	return (hello.MatchString(sentence) || signOff.MatchString(sentence)) && !anyVerb.MatchString(sentence)
}

func splitSentences(line string) []string {
	var out []string
	start := 0
	quoted := quotedRanges(line)
	for i, r := range line {
		if !strings.ContainsRune(".!?;", r) || inRanges(quoted, i) {
			continue
		}
		if next := i + 1; next == len(line) || line[next] == ' ' || line[next] == '\t' {
			out = appendNonEmpty(out, line[start:next])
			start = next
		}
	}
	return appendNonEmpty(out, line[start:])
}

func appendNonEmpty(out []string, s string) []string {
	if s = strings.TrimSpace(s); s != "" {
		out = append(out, s)
	}
	return out
}

// clauses splits a sentence where a comma, "and" or "then" is followed by an edit verb
// ("… green and add a paragraph …"), outside quotes.
func clauses(sentence string) []string {
	quoted := quotedRanges(sentence)
	var out []string
	start := 0
	for _, m := range separator.FindAllStringSubmatchIndex(sentence, -1) {
		if m[0] < start || inRanges(quoted, m[0]) {
			continue
		}
		out = append(out, sentence[start:m[0]])
		start = m[2]
	}
	return append(out, sentence[start:])
}

// quotePairs are the quotes a value may be written in.
var quotePairs = map[rune]rune{'"': '"', '“': '”', '‘': '’', '«': '»', '\'': '\'', '`': '`'}

// quotedRanges returns the byte ranges of double-quoted text ("…", “…”, «…»). Single quotes
// double as apostrophes, so they do not protect text from splitting.
func quotedRanges(s string) [][2]int {
	var out [][2]int
	open, closing := -1, rune(0)
	for i, r := range s {
		switch {
		case open >= 0 && r == closing:
			out = append(out, [2]int{open, i})
			open = -1
		case open < 0 && (r == '"' || r == '“' || r == '«'):
			open, closing = i, quotePairs[r]
		}
	}
	if open >= 0 {
		out = append(out, [2]int{open, len(s)})
	}
	return out
}

func inRanges(ranges [][2]int, i int) bool {
	for _, r := range ranges {
		if i > r[0] && i < r[1] {
			return true
		}
	}
	return false
}

// clean removes greetings, polite filler and final punctuation from a clause. end is the
// final . ! or ? it had, for text that keeps it (a paragraph).
func clean(text string) (cleaned, end string) {
	text = strings.TrimSpace(text)
	if n := len(text); n > 0 && strings.ContainsRune(".!?", rune(text[n-1])) {
		end = text[n-1:]
	}
	for prev := ""; prev != text; {
		prev = text
		text = greeting.ReplaceAllString(text, "")
		text = leadFiller.ReplaceAllString(text, "")
		text = tailFiller.ReplaceAllString(text, "")
		text = strings.TrimSpace(tailPunct.ReplaceAllString(text, ""))
	}
	return text, end
}

// unquote removes one pair of quotes around a value, and the spaces around it.
func unquote(v string) string {
	v = strings.TrimSpace(v)
	rs := []rune(v)
	if len(rs) >= 2 && quotePairs[rs[0]] == rs[len(rs)-1] && quotePairs[rs[0]] != 0 {
		return string(rs[1 : len(rs)-1])
	}
	return v
}

// isQuoted reports whether v is wholly in quotes.
func isQuoted(v string) bool { return unquote(v) != strings.TrimSpace(v) }

// quote puts s in double quotes, for messages.
func quote(s string) string { return `"` + s + `"` }

// notFound is ErrNotFound with a message for the owner in place of the sentinel's text.
func notFound(format string, args ...any) error {
	return &failure{msg: fmt.Sprintf(format, args...), kind: ErrNotFound}
}

// failure is a message for the owner that matches a sentinel error.
type failure struct {
	msg  string
	kind error
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.kind }
