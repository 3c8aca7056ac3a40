package demo

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Edit performs the literal edits an instruction asks for on the site in dir (see the
// package documentation for the language), and returns a one-line summary starting with
// SummaryPrefix and the files it changed (slash-separated paths relative to dir, sorted).
//
// It is all or nothing: when a sentence is not understood (ErrNotUnderstood, its message
// lists what the demo agent can do), names an unsafe path (ErrUnsafePath), or needs
// something the site lacks (ErrNotFound, ErrExists), no file is written. Safe for concurrent
// use on different directories.
func Edit(dir, instruction string) (summary string, changed []string, err error) {
	r, err := run(dir, instruction)
	if err != nil {
		return "", nil, err
	}
	return r.summary(), r.changed, nil
}

// report is what a run did: one line per edit, and the files changed.
type report struct {
	done    []string
	changed []string
}

func (r report) summary() string {
	s := SummaryPrefix + strings.Join(r.done, "; ")
	if !strings.HasSuffix(s, `"`) {
		s += "."
	}
	if len(r.changed) == 0 {
		s += " No file needed changing."
	}
	return s
}

func run(dir, instruction string) (report, error) {
	clauses, err := parse(instruction)
	if err != nil {
		return report{}, err
	}
	s, err := openSite(dir)
	if err != nil {
		return report{}, err
	}
	defer s.close()
	var r report
	for _, c := range clauses {
		done, err := c.edit.apply(s)
		if err != nil {
			return report{}, fmt.Errorf("demo: %s: %w", quote(c.text), err)
		}
		r.done = append(r.done, done)
	}
	r.changed, err = s.commit()
	return r, err
}

// RunAgent is the demo agent as a command for the agent package's "command" kind: it reads
// the instruction from stdin, edits the site in dir, and prints one line per edit ("edit 1:
// …"), the files changed, and a final summary line starting with SummaryPrefix — the line
// the platform reports to the owner. When the instruction is not understood it prints Help
// before the summary line. It returns the exit code: 0 when every edit was made, 1 when
// nothing was changed (not understood, or an edit could not be made).
func RunAgent(stdin io.Reader, stdout io.Writer, dir string) int {
	b, err := io.ReadAll(io.LimitReader(stdin, maxInstruction+1))
	switch {
	case err != nil:
		return fail(stdout, fmt.Errorf("could not read the instruction: %w", err))
	case len(b) > maxInstruction:
		return fail(stdout, fmt.Errorf("the instruction is longer than %d bytes", maxInstruction))
	}
	r, err := run(dir, string(b))
	if err != nil {
		return fail(stdout, err)
	}
	for i, d := range r.done {
		fmt.Fprintf(stdout, "edit %d: %s\n", i+1, d)
	}
	if len(r.changed) > 0 {
		fmt.Fprintf(stdout, "changed: %s\n", strings.Join(r.changed, ", "))
	}
	fmt.Fprintln(stdout, r.summary())
	return 0
}

// fail prints why nothing was changed, as the summary line, and returns exit code 1.
func fail(stdout io.Writer, err error) int {
	if errors.Is(err, ErrNotUnderstood) {
		fmt.Fprintln(stdout, Help)
	}
	msg := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "demo: ")), " ")
	fmt.Fprintf(stdout, "%s%s. Nothing was changed.\n", SummaryPrefix, strings.TrimSuffix(msg, "."))
	return 1
}
