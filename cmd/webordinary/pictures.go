package main

import (
	"flag"
	"log/slog"
	"time"

	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/shots"
)

// pictureFlags configure the pictures of each job's change (package shots).
type pictureFlags struct {
	dir        string
	chromium   string
	pages      int
	pageBudget time.Duration
}

func (p *pictureFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.dir, "shots", "", "directory for the pictures of each job's change; shared by workers and serve, like --previews (default <data>/shots)")
	fs.StringVar(&p.chromium, "chromium", "", `headless Chromium for the pictures (default: the system's chromium); "off": no pictures`)
	fs.IntVar(&p.pages, "shot-pages", shots.DefaultPages, "pages pictured per job, most relevant first")
	fs.DurationVar(&p.pageBudget, "shot-budget", shots.DefaultPageBudget, "time budget of one picture; a page that takes longer gets none")
}

// shooter is the pipeline's picture taker; nil with --chromium off.
func (p *pictureFlags) shooter(sb *sandbox.Sandbox, log *slog.Logger) (*shots.Shooter, error) {
	if p.chromium == "off" {
		return nil, nil
	}
	return shots.New(shots.Config{Dir: p.dir, Browser: p.chromium, Sandbox: sb, Pages: p.pages, PageBudget: p.pageBudget, Logger: log})
}

// store is where serve reads the pictures for replies and job pages; nil with --chromium off.
func (p *pictureFlags) store() *shots.Store {
	if p.chromium == "off" {
		return nil
	}
	return &shots.Store{Dir: p.dir}
}
