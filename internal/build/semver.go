package build

import (
	"fmt"
	"strconv"
	"strings"
)

// satisfies reports whether version (like v20.20.2) meets a Node range in the forms sites use:
// ">=22.12.0", "^22.12", "22", "22.x", ">=18 <23", "18 || 20 || >=22". Unknown forms are an error.
func satisfies(version, rng string) (bool, error) {
	v, err := parseVersion(version)
	if err != nil {
		return false, err
	}
	for _, alt := range strings.Split(rng, "||") {
		ok, err := allOf(v, strings.Fields(alt))
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

func allOf(v [3]int, terms []string) (bool, error) {
	for _, term := range terms {
		ok, err := one(v, term)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func one(v [3]int, term string) (bool, error) {
	op := strings.TrimRight(term, "0123456789.xX*v")
	want, err := parseVersion(strings.TrimPrefix(term, op))
	if err != nil {
		return false, err
	}
	c := compare(v, want)
	switch op {
	case ">=":
		return c >= 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	case "<":
		return c < 0, nil
	case "^":
		return c >= 0 && v[0] == want[0], nil
	case "~":
		return c >= 0 && v[0] == want[0] && v[1] == want[1], nil
	case "", "=":
		return v[0] == want[0] && (strings.Count(term, ".") == 0 || v[1] == want[1] || strings.Contains(term, "x")), nil
	}
	return false, fmt.Errorf("unsupported node range term %q", term)
}

func parseVersion(s string) ([3]int, error) {
	var v [3]int
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(s), "v"), ".", 3)
	for i, p := range parts {
		if p == "x" || p == "X" || p == "*" {
			break
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, fmt.Errorf("version %q: %w", s, err)
		}
		v[i] = n
	}
	return v, nil
}

func compare(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
