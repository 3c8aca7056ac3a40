// Package tenant names the unit of ownership in webordinary: a project and a user.
//
// Both parts match ^[a-z0-9][a-z0-9-]{0,62}$, so a tenant is safe to embed in queue names,
// NATS subjects, bucket names and file paths without escaping.
package tenant

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrInvalid is returned for a project or user id that does not match the id pattern.
var ErrInvalid = errors.New("invalid tenant id")

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ID identifies a tenant: one user's work on one project.
type ID struct {
	Project string `json:"project"`
	User    string `json:"user"`
}

// New validates project and user and returns their tenant.
func New(project, user string) (ID, error) {
	if err := ValidatePart("project", project); err != nil {
		return ID{}, err
	}
	if err := ValidatePart("user", user); err != nil {
		return ID{}, err
	}
	return ID{Project: project, User: user}, nil
}

// ValidatePart checks one id part; kind ("project", "user", "thread") names it in the error.
func ValidatePart(kind, s string) error {
	if idPattern.MatchString(s) {
		return nil
	}
	return fmt.Errorf("%w: %s %q must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit (for example %q)",
		ErrInvalid, kind, s, suggest(s))
}

// Parse reads the "project/user" form printed by String.
func Parse(s string) (ID, error) {
	project, user, ok := strings.Cut(s, "/")
	if !ok {
		return ID{}, fmt.Errorf("%w: %q is not of the form project/user", ErrInvalid, s)
	}
	return New(project, user)
}

// String returns "project/user".
func (t ID) String() string { return t.Project + "/" + t.User }

// Subject returns "project.user", the form used in NATS subjects and KV keys.
func (t ID) Subject() string { return t.Project + "." + t.User }

// Name returns "project_user", unambiguous because '_' is not allowed in either part.
func (t ID) Name() string { return t.Project + "_" + t.User }

// ParseSubject reads the "project.user" form returned by Subject.
func ParseSubject(s string) (ID, error) {
	project, user, ok := strings.Cut(s, ".")
	if !ok {
		return ID{}, fmt.Errorf("%w: %q is not of the form project.user", ErrInvalid, s)
	}
	return New(project, user)
}

// suggest turns s into a valid id, for error messages.
func suggest(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0:
			b.WriteRune('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 63 {
		out = out[:63]
	}
	if out == "" {
		return "my-site"
	}
	return out
}
