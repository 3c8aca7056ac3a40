package auth

import (
	"strings"
)

// An Authentication-Results header field (RFC 8601), parsed as far as we use it.
type authResults struct {
	servID  string
	results []resInfo
}

// resInfo is one "method=result prop=value ..." clause.
type resInfo struct {
	method string            // lowercase, version stripped: dkim, spf, dmarc
	result string            // lowercase
	props  map[string]string // lowercase keys: header.d, smtp.mailfrom, reason, ...
}

// parseAuthResults parses one header field value. Comments are dropped and quoted strings
// respected, so a ";" inside "(1024-bit key; unprotected)" does not split a clause. ok is false
// when not even the authserv-id can be read.
func parseAuthResults(value string) (authResults, bool) {
	clauses := splitClauses(value)
	head := tokenize(clauses[0])
	if len(head) == 0 || head[0].eq {
		return authResults{}, false
	}
	ar := authResults{servID: head[0].text}
	for _, c := range clauses[1:] {
		if ri, ok := parseResInfo(c); ok {
			ar.results = append(ar.results, ri)
		}
	}
	return ar, true
}

// parseResInfo parses "dkim=pass reason=x header.d=example.com".
func parseResInfo(clause string) (resInfo, bool) {
	pairs := keyValues(tokenize(clause))
	if len(pairs) == 0 {
		return resInfo{}, false
	}
	method, _, _ := strings.Cut(pairs[0][0], "/")
	ri := resInfo{method: strings.ToLower(method), result: strings.ToLower(pairs[0][1]), props: map[string]string{}}
	for _, kv := range pairs[1:] {
		ri.props[strings.ToLower(kv[0])] = kv[1]
	}
	return ri, true
}

// token is a word, a quoted string (unquoted), or "=".
type token struct {
	text string
	eq   bool
}

// keyValues pairs up "k = v" token runs, skipping anything else.
func keyValues(toks []token) [][2]string {
	var kvs [][2]string
	for i := 0; i+2 < len(toks); i++ {
		if !toks[i].eq && toks[i+1].eq && !toks[i+2].eq {
			kvs = append(kvs, [2]string{toks[i].text, toks[i+2].text})
			i += 2
		}
	}
	return kvs
}

// splitClauses splits at ";" outside quoted strings and turns comments into spaces; it always
// returns at least one clause.
func splitClauses(s string) []string {
	var (
		clauses []string
		cur     strings.Builder
		sc      scanner
	)
	for _, r := range s {
		switch sc.step(r) {
		case emit:
			cur.WriteRune(r)
		case blank:
			cur.WriteByte(' ')
		case split:
			clauses = append(clauses, cur.String())
			cur.Reset()
		}
	}
	return append(clauses, cur.String())
}

// scanner tracks RFC 5322 comments and quoted strings.
type scanner struct {
	depth   int  // comment nesting
	quoted  bool // inside a quoted string
	escaped bool // after a backslash
}

// action says what to do with one character of an Authentication-Results value.
type action int

const (
	emit  action = iota // keep it
	blank               // part of a comment: write a space instead
	split               // a clause separator
)

func (s *scanner) step(r rune) action {
	switch {
	case s.depth > 0:
		s.comment(r)
		return blank
	case s.quoted:
		s.quote(r)
		return emit
	case r == '(':
		s.depth = 1
		return blank
	case r == '"':
		s.quoted = true
		return emit
	case r == ';':
		return split
	}
	return emit
}

func (s *scanner) comment(r rune) {
	switch {
	case s.escaped:
		s.escaped = false
	case r == '\\':
		s.escaped = true
	case r == '(':
		s.depth++
	case r == ')':
		s.depth--
	}
}

func (s *scanner) quote(r rune) {
	switch {
	case s.escaped:
		s.escaped = false
	case r == '\\':
		s.escaped = true
	case r == '"':
		s.quoted = false
	}
}

// tokenize splits a clause (comments already gone) into words, quoted strings and "=".
func tokenize(s string) []token {
	var toks []token
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		var t token
		t, s = nextToken(s)
		toks = append(toks, t)
	}
	return toks
}

func nextToken(s string) (token, string) {
	switch s[0] {
	case '=':
		return token{text: "=", eq: true}, s[1:]
	case '"':
		return quotedToken(s[1:])
	}
	end := strings.IndexFunc(s, func(r rune) bool { return r == '=' || r == '"' || isSpace(r) })
	if end < 0 {
		end = len(s)
	}
	return token{text: s[:end]}, s[end:]
}

func quotedToken(s string) (token, string) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case s[i] == '"':
			return token{text: b.String()}, s[i+1:]
		default:
			b.WriteByte(s[i])
		}
	}
	return token{text: b.String()}, ""
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\r' || r == '\n'
}

// validAuthServID accepts an empty id (not behind a relay) or a single token.
func validAuthServID(id string) bool {
	return !strings.ContainsAny(id, " \t\r\n;()\"=")
}
