package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// usageError is a command line the command cannot use: main prints it once with a hint to
// run the command's -h, and exits 2.
type usageError struct {
	command string
	err     error
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// parseQuiet parses args without the flag package's own printing: -h prints the usage (on
// stdout, see main) and returns flag.ErrHelp; a bad flag returns a usageError, printed once.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	case err != nil:
		return usageError{fs.Name(), err}
	}
	return nil
}

// missing is a usageError for required flags not given.
func missing(command string, example string, names ...string) error {
	return usageError{command, fmt.Errorf("missing %s, e.g. %s", strings.Join(names, " and "), example)}
}

// colour is whether stdout is a terminal that wants colour (not with NO_COLOR set).
var colour = func() bool {
	fi, err := os.Stdout.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}()

// paint wraps s in an ANSI colour on a terminal.
func paint(code, s string) string {
	if !colour || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// stateColour paints a job state: green done, red failed or dead, yellow in progress.
func stateColour(state string) string {
	switch state {
	case "done":
		return paint("32", state)
	case "failed", "dead", "interrupted":
		return paint("31", state)
	}
	return paint("33", state)
}

// human is a duration as people read it: 850ms, 1.2s, 42s, 3m5s, 2h10m.
func human(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + human(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return strings.TrimSuffix(d.Round(time.Second).String(), "0s")
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// ago is the time since t, or "-" when t is zero.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if time.Since(t) < time.Second {
		return "just now"
	}
	return human(time.Since(t).Round(time.Second)) + " ago"
}
