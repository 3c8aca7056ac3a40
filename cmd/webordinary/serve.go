package main

import (
	"context"
	"errors"
	"strings"

	"github.com/webordinary/webordinary/internal/app"
)

// serveFlags are serve's settings: its keys and the flags that set a few of them.
type serveFlags struct {
	*procConfig
}

func runServe(ctx context.Context, args []string) error {
	f, err := parseServe(args)
	if err != nil {
		return err
	}
	return f.run(ctx)
}

// parseServe parses serve's flags and config (also used by demo).
func parseServe(args []string) (*serveFlags, error) {
	fs := newFlags("serve", "[--config FILE] [flags]")
	f := &serveFlags{newProcConfig(app.RoleServe, fs)}
	if err := noServeNATS(args); err != nil {
		return nil, usageError{"serve", err}
	}
	if err := f.parse(fs, args); err != nil {
		return nil, err
	}
	return f, nil
}

// noServeNATS refuses serve's old --nats, which --engine replaced.
func noServeNATS(args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && name == "nats" {
			return errors.New("serve has no --nats: give --engine nats://HOST:4222 (engine.url in the config file)")
		}
	}
	return nil
}

// config is the app.Config the flags and keys say.
func (f *serveFlags) config() app.Config {
	c := f.cfg
	if c.Engine != "" && !strings.HasPrefix(c.Engine, "embedded://") && !f.set.Changed("engine.listen") {
		c.EngineListen = "" // only the embedded engine listens
	}
	return c
}

func (f *serveFlags) run(ctx context.Context) error {
	a, err := app.New(ctx, f.config())
	if err != nil {
		return f.explain(err)
	}
	return f.explain(a.Run(ctx))
}
