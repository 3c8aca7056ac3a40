package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"

	"github.com/webordinary/webordinary/internal/app"
	"github.com/webordinary/webordinary/internal/conf"
)

// procConfig is what serve and worker read: an app.Config whose keys (and the log's) fill
// from the config file, the environment, --set and the few flags, in that order.
type procConfig struct {
	cfg app.Config
	set *conf.Set
	cmd *conf.Command
	log logKeys
}

// newProcConfig registers role's keys and binds them to fs.
func newProcConfig(role app.Role, fs *flag.FlagSet) *procConfig {
	p := &procConfig{cfg: app.Config{Role: role}, set: conf.NewSet()}
	p.cfg.Keys(p.set)
	p.log.keys(p.set.Section("log"))
	p.cmd = p.set.Bind(fs)
	procFlags.Store(fs, true)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(fs.Output(), keysNote)
	}
	return p
}

// keysNote ends serve's and worker's usage.
const keysNote = `
Everything else is a key of the config file (--config FILE, or --set KEY=VALUE over it):
'webordinary config keys' lists every key with its default and variable, 'webordinary
config example' prints a file to start from.
`

// newConfigSet is the Set of every key, for the reference and the example (serve's view).
func newConfigSet() *conf.Set {
	p := newProcConfig(app.RoleServe, flag.NewFlagSet("serve", flag.ContinueOnError))
	return p.set
}

// parse parses args, refusing removed flags by the key that replaced each, then fills the
// keys from every source and makes the logger.
func (p *procConfig) parse(fs *flag.FlagSet, args []string) error {
	if err := p.cmd.CheckArgs(args); err != nil {
		return usageError{fs.Name(), err}
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := p.cmd.Apply(os.LookupEnv); err != nil {
		return err
	}
	if parseOnly {
		return errParsedOnly
	}
	var err error
	p.cfg.Logger, err = p.log.logger(os.Stderr)
	p.cfg.Banner = os.Stderr
	return err
}

// fieldPath matches a Config field path in an app error, such as Worker.LeaseTTL.
var fieldPath = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*(?:\.[A-Z][A-Za-z0-9]*)*\b`)

// explain rewrites an app error that names Config fields to name their keys (or flags).
func (p *procConfig) explain(err error) error {
	var fe *app.FieldError
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	return errors.New(fieldPath.ReplaceAllStringFunc(err.Error(), func(f string) string {
		switch k := p.cfg.FieldKey(p.set, f); {
		case k == nil:
			return f
		case k.FlagName() != "":
			return "--" + k.FlagName()
		default:
			return k.Name
		}
	}))
}

// logKeys are the log section: level and format.
type logKeys struct{ level, format string }

func (l *logKeys) keys(s *conf.Section) {
	s.String(&l.level, "level", "info", "debug, info, warn or error").Flag("log-level")
	s.String(&l.format, "format", "text", "text or json").Was("log-format")
}

func (l *logKeys) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log.format %q: use text or json", l.format)
}

// engineURL is --engine, else --nats (a bare host:port is a nats:// one).
func engineURL(engine, nats string) (string, error) {
	switch {
	case engine != "" && nats != "":
		return "", errors.New("give --engine (engine.url) or --nats, not both")
	case nats != "" && !strings.Contains(nats, "://"):
		return "nats://" + nats, nil
	case nats != "":
		return nats, nil
	}
	return engine, nil
}
