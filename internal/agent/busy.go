package agent

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// busyWords are what the agent CLIs print when the model service turned a request away or
// could not be reached (lower case): HTTP 429/529/502/503/504, rate limits, overload, and
// network errors.
var busyWords = []string{
	"rate limit", "rate_limit", "too many requests", "overloaded", "service unavailable", "temporarily unavailable",
	"connection error", "connection refused", "connection reset", "no such host", "network error", "fetch failed",
	"socket hang up", "econnrefused", "econnreset", "enotfound", "etimedout", "eai_again", "request timed out",
}

// busyStatus matches an HTTP status the model API answers when it is busy or down, as the
// CLIs print it ("API Error: 429", "status: 529", "last status: 503").
var busyStatus = regexp.MustCompile(`(?i)(?:api error|status|http)[: ]+(429|529|502|503|504)\b`)

// retryAfter matches a delay the service asked for: "retry-after: 30", "Retry-After: 30s",
// "retry after 30 seconds", "try again in 30s", "retry_after_ms": 1500.
var (
	retryAfter   = regexp.MustCompile(`(?i)(?:retry[-_ ]after|try again in)["']?[:= ]*["']?([0-9]+(?:\.[0-9]+)?)\s*(ms|s|sec|secs|seconds?|m|min|minutes?)?\b`)
	retryAfterMS = regexp.MustCompile(`(?i)retry[-_]after[-_]ms["']?[:= ]*([0-9]+)`)
)

// tailForBusy is how much of the end of the output is searched besides Result.Error (a CLI's
// own network error is often only on stderr).
const tailForBusy = 1024

// ModelBusy reports whether a failed run failed because the model service turned it away
// (rate limited, overloaded, down) or could not be reached — a transient failure worth
// running again — and the delay the service asked for (0 when it named none). A run that
// succeeded, was interrupted or was stopped by a watchdog is never busy.
func (r Result) ModelBusy() (retryAfter time.Duration, busy bool) {
	if r.OK || r.Interrupted || r.TimedOut != "" {
		return 0, false
	}
	text := r.Error + "\n" + r.OutputTail[max(0, len(r.OutputTail)-tailForBusy):]
	lower := strings.ToLower(text)
	busy = busyStatus.MatchString(text)
	for _, w := range busyWords {
		busy = busy || strings.Contains(lower, w)
	}
	if !busy {
		return 0, false
	}
	return retryAfterIn(text), true
}

// retryAfterIn is the delay named in text, 0 when none.
func retryAfterIn(text string) time.Duration {
	if m := retryAfterMS.FindStringSubmatch(text); m != nil {
		ms, _ := strconv.Atoi(m[1])
		return time.Duration(ms) * time.Millisecond
	}
	m := retryAfter.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	unit := time.Second
	switch {
	case m[2] == "ms":
		unit = time.Millisecond
	case strings.HasPrefix(m[2], "m"):
		unit = time.Minute
	}
	return time.Duration(n * float64(unit))
}
