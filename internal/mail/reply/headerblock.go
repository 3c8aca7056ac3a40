package reply

import "regexp"

// headerWindow is how many lines after "From:" may hold the rest of a header block (long To and
// Cc lists wrap onto extra lines).
const headerWindow = 8

// isHeaderBlock reports whether an Outlook-style header block starts at i: a From label followed
// by a Sent/Date label whose value holds a full date, and a To or Subject label. Requiring all
// three keeps content lines such as "From: Monday to Friday" or an event's "From: 10am / To: 2pm /
// Date: Saturday" in the text.
func isHeaderBlock(lines []string, i int) bool {
	first := label(lines[i])
	dateFirst := sentLabels[first] && fullDate.MatchString(lines[i])
	if !fromLabels[first] && !dateFirst {
		return false
	}
	from, sent, toOrSubject := !dateFirst, dateFirst, false
	for _, l := range headerFollowers(lines, i) {
		lb := label(l)
		from = from || fromLabels[lb]
		sent = sent || (sentLabels[lb] && fullDate.MatchString(l))
		toOrSubject = toOrSubject || toLabels[lb] || subjectLabels[lb]
	}
	return from && sent && toOrSubject
}

// fullDate matches a date with a year, as header blocks write the sent date: "January 6, 2025",
// "1/6/25", "2025年1月6日".
var fullDate = regexp.MustCompile(`\b(19|20)\d{2}|\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}|(19|20)\d{2}年`)

// headerFollowers returns the non-blank lines after line i that may belong to its header block:
// up to headerWindow of them, across single blank lines when the next line is labeled (HTML
// converted with one paragraph per field), stopping at any other blank line.
func headerFollowers(lines []string, i int) []string {
	var out []string
	for j := i + 1; j < len(lines) && len(out) < headerWindow; j++ {
		if !isBlankLine(lines[j]) {
			out = append(out, lines[j])
			continue
		}
		if j+1 >= len(lines) || label(lines[j+1]) == "" {
			break
		}
	}
	return out
}

// headerOnlyForward treats a body that is nothing but an Outlook header block and the message
// below it as a forward (that is what an Outlook forward looks like): the result is the inner
// message's new text.
func headerOnlyForward(s scanResult, lines []string, depth int) (Result, bool) {
	if s.history != historyHeaders || s.headers < 0 {
		return Result{}, false
	}
	headers, rest := forwardedBody(lines[s.headers:])
	inner := extractLines(rest, depth+1)
	if inner.Text == "" {
		return Result{}, false
	}
	inner.Forwarded = true
	inner.Quoted = joinParts(joinText(headers), inner.Quoted)
	return inner, true
}
