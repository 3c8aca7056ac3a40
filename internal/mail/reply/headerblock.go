package reply

import (
	"strings"
)

// headerWindow is how many lines after "From:" may hold the rest of a header block (long To and
// Cc lists wrap onto extra lines).
const headerWindow = 8

// isHeaderBlock reports whether an Outlook-style header block starts at i: a From label followed
// by a Sent/Date label whose value holds a full date, and a To or Subject label; or a Date label
// with a full date first and a To label with an address (a block that left From out). Requiring
// this much keeps content lines such as "From: Monday to Friday" or an event's "From: 10am / To:
// 2pm / Date: Saturday" in the text.
func isHeaderBlock(lines []string, i int) bool {
	first := label(lines[i])
	dateFirst := sentLabels[first] && isFullDate(lines[i])
	if !fromLabels[first] && !dateFirst {
		return false
	}
	from, sent, toOrSubject, toAddress := !dateFirst, dateFirst, false, false
	for _, l := range headerFollowers(lines, i) {
		lb := label(l)
		from = from || fromLabels[lb]
		sent = sent || (sentLabels[lb] && isFullDate(l))
		toOrSubject = toOrSubject || toLabels[lb] || subjectLabels[lb]
		toAddress = toAddress || toLabels[lb] && strings.Contains(l, "@")
	}
	return sent && (from && toOrSubject || dateFirst && toAddress) || fromSentPair(lines, i)
}

// fromSentPair reports whether lines i and i+1 are a From label with an address and a Sent/Date
// label with a full date and a time: a header block cut to its first two lines, as some clients
// and forwarding tools leave it ("From: a@b.c [mailto:a@b.c]" / "Sent: Tuesday, January 13, 2009
// 1:27 PM").
func fromSentPair(lines []string, i int) bool {
	if i+1 >= len(lines) || !fromLabels[label(lines[i])] || !strings.Contains(lines[i], "@") {
		return false
	}
	next := lines[i+1]
	return sentLabels[label(next)] && isFullDate(next) && clockTime.MatchString(next)
}

// clockTime matches a time of day ("1:27", "13.20" is not one).
var clockTime = lazy(`\b\d{1,2}:\d{2}\b`)

// fullDate matches a date with a year, as header blocks write the sent date: "January 6, 2025",
// "1/6/25", "2025年1月6日".
var fullDate = lazy(`\b(19|20)\d{2}|\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}|(19|20)\d{2}年`)

// monthDayTime matches a month name, a day and a time without a four-digit year, as some clients
// write the sent date: "March-19-11 5:42 PM", "Mar 19, 5:42 PM".
var monthDayTime = lazy(`(?i)\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?[ -]\d{1,2}\b.*\b\d{1,2}:\d{2}\b`)

// isFullDate reports whether a header line's value holds a full sent date.
func isFullDate(l string) bool {
	return fullDate.MatchString(l) || monthDayTime.MatchString(l)
}

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
