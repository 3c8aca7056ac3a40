package message

import (
	"bytes"
	"fmt"
	"regexp"
)

// maxParts caps the MIME parts handed to enmime, whose tree building is quadratic in the number
// of parts: a hostile message with tens of thousands of tiny parts would otherwise take minutes.
// Real mail has a few dozen at most.
const maxParts = 1000

// maxBoundaries caps how many distinct boundary parameters are looked for.
const maxBoundaries = 64

// boundaryParam finds boundary parameters anywhere in the raw message (nested parts too).
var boundaryParam = regexp.MustCompile(`(?i)boundary\s*=\s*(?:"([^"\r\n]+)"|([^\s;"]+))`)

// limitParts returns raw cut just before the delimiter line that would start part maxParts+1,
// and whether it cut anything.
func limitParts(raw []byte) ([]byte, bool) {
	delims := boundaryDelimiters(raw)
	if len(delims) == 0 {
		return raw, false
	}
	count := 0
	for i := 0; i < len(raw); {
		next := bytes.Index(raw[i:], []byte("\n--"))
		if next < 0 {
			break
		}
		at := i + next + 1
		if startsWithAny(raw[at:], delims) {
			count++
			if count > maxParts {
				return raw[:at], true
			}
		}
		i = at
	}
	return raw, false
}

// boundaryDelimiters returns "--boundary" for each distinct boundary parameter, at most
// maxBoundaries of them.
func boundaryDelimiters(raw []byte) [][]byte {
	seen := make(map[string]bool)
	var out [][]byte
	for _, m := range boundaryParam.FindAllSubmatch(raw, maxBoundaries) {
		b := string(m[1]) + string(m[2])
		if !seen[b] {
			seen[b] = true
			out = append(out, []byte("--"+b))
		}
	}
	return out
}

// startsWithAny reports whether b starts with one of the prefixes.
func startsWithAny(b []byte, prefixes [][]byte) bool {
	for _, p := range prefixes {
		if bytes.HasPrefix(b, p) {
			return true
		}
	}
	return false
}

// truncationProblem describes a cut made by limitParts.
func truncationProblem() string {
	return fmt.Sprintf("error: more than %d MIME parts; the rest of the message was dropped", maxParts)
}
