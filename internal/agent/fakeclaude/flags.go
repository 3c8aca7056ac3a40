package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// options are the claude flags fakeclaude understands.
type options struct {
	print          bool
	verbose        bool
	outputFormat   string
	permissionMode string
	model          string
	maxTurns       int
	maxBudgetUSD   float64
	systemPrompt   string
	sessionID      string
	resume         string
	prompt         string
	addDirs        []string
}

// valueFlags are the flags that take a value, and where it goes.
func (o *options) valueFlags() map[string]func(string) error {
	str := func(p *string) func(string) error { return func(v string) error { *p = v; return nil } }
	return map[string]func(string) error{
		"--output-format":        str(&o.outputFormat),
		"--permission-mode":      str(&o.permissionMode),
		"--model":                str(&o.model),
		"--append-system-prompt": str(&o.systemPrompt),
		"--system-prompt":        str(&o.systemPrompt),
		"--session-id":           str(&o.sessionID),
		"--resume":               str(&o.resume),
		"-r":                     str(&o.resume),
		"--add-dir":              func(v string) error { o.addDirs = append(o.addDirs, v); return nil },
		"--max-turns": func(v string) (err error) {
			o.maxTurns, err = strconv.Atoi(v)
			return err
		},
		"--max-budget-usd": func(v string) (err error) {
			o.maxBudgetUSD, err = strconv.ParseFloat(v, 64)
			return err
		},
	}
}

func (o *options) boolFlags() map[string]*bool {
	return map[string]*bool{"-p": &o.print, "--print": &o.print, "--verbose": &o.verbose}
}

// parseArgs parses claude's command line. Unknown flags are reported on warn and skipped,
// with the next argument when it does not look like a flag (it is probably their value).
func parseArgs(args []string, warn io.Writer) (options, error) {
	o := options{outputFormat: "text"}
	values, bools := o.valueFlags(), o.boolFlags()
	var positional []string
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		switch {
		case args[i] == "--":
			positional = append(positional, args[i+1:]...)
			i = len(args)
		case bools[name] != nil && !hasVal:
			*bools[name] = true
		case values[name] != nil:
			if !hasVal {
				if i+1 >= len(args) {
					return o, fmt.Errorf("option '%s' argument missing", name)
				}
				i++
				val = args[i]
			}
			if err := values[name](val); err != nil {
				return o, fmt.Errorf("option '%s': %v", name, err)
			}
		case strings.HasPrefix(args[i], "-") && len(args[i]) > 1:
			fmt.Fprintf(warn, "fakeclaude: ignoring unknown option %s\n", name)
			if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
		default:
			positional = append(positional, args[i])
		}
	}
	o.prompt = strings.Join(positional, " ")
	return o, nil
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// check rejects what claude rejects.
func (o options) check() error {
	switch {
	case !o.print:
		return errors.New("fakeclaude only supports print mode (-p)")
	case o.outputFormat != "text" && o.outputFormat != "json" && o.outputFormat != "stream-json":
		return fmt.Errorf("invalid output format %q", o.outputFormat)
	case o.outputFormat == "stream-json" && !o.verbose:
		return errors.New("When using --print, --output-format=stream-json requires --verbose")
	case o.sessionID != "" && o.resume != "":
		return errors.New("--session-id cannot be used with --resume")
	case o.sessionID != "" && !uuidRE.MatchString(o.sessionID):
		return errors.New("Invalid session ID. Must be a valid UUID.")
	case os.Getenv("CLAUDE_CONFIG_DIR") == "":
		return errors.New("CLAUDE_CONFIG_DIR is not set (fakeclaude keeps its sessions there)")
	}
	return nil
}

// requestedSession is the session id the command line names, if any.
func (o options) requestedSession() string {
	if o.resume != "" {
		return o.resume
	}
	return o.sessionID
}
