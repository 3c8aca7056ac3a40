package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/webordinary/webordinary/internal/conf"
)

// usageOut receives flag usage (stderr; the reference generator captures it).
var usageOut io.Writer = os.Stderr

// newFlags returns a flag set whose usage lists each flag's environment variable.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(usageOut)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: webordinary %s %s\n\nFlags (environment variable in brackets):\n", name, synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if f.DefValue != "" && !strings.Contains(f.Usage, "(default") {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			env := " [" + envName(f.Name) + "]"
			if f.Name == "set" {
				env = "" // --set is the command line's; the environment has each key's own variable
			}
			fmt.Fprintf(fs.Output(), "  --%s%s\n    \t%s%s\n", f.Name, env, f.Usage, def)
		})
	}
	return fs
}

func envName(flagName string) string { return conf.EnvName(flagName) }

// parse applies environment variables to flags not given on the command line, then args.
func parse(fs *flag.FlagSet, args []string) error {
	_, err := parseWith(fs, args, 0)
	return err
}

// parseOnly, set by tests only, makes every command return errParsedOnly once its command line
// (and, for serve and worker, their config) is read, before it acts: a test can then check
// that the commands the docs show are accepted as written.
var parseOnly bool

// errParsedOnly is what a command returns under parseOnly.
var errParsedOnly = errors.New("parsed only")

// parseWith is parse allowing up to max positional arguments, before or after the flags.
func parseWith(fs *flag.FlagSet, args []string, max int) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := parseQuiet(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) > max {
		return nil, usageError{fs.Name(), fmt.Errorf("unexpected argument %q", pos[max])}
	}
	if err := applyEnv(fs); err != nil {
		return nil, err
	}
	if _, proc := procFlags.Load(fs); parseOnly && !proc {
		return nil, errParsedOnly
	}
	return pos, nil
}

// procFlags are the flag sets of serve and worker, which read their config after the flags
// (parseOnly stops them after that).
var procFlags sync.Map // *flag.FlagSet → true

// applyEnv sets the flags not given from their variables, but for the flags of config keys:
// conf.Command.Apply reads those in their turn (the file < the environment < --set < flags).
func applyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if _, key := f.Value.(interface{ Key() *conf.Key }); key || f.Name == "set" {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok && !set[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
			}
		}
	})
	return err
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}
