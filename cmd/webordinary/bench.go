package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/bench"
)

func runBench(ctx context.Context, args []string) error {
	var (
		cfg      bench.Config
		only     string
		packages string
	)
	fs := newFlags("bench", "[flags]")
	fs.IntVar(&cfg.Samples, "samples", 300, "dispatch samples per mode")
	fs.IntVar(&cfg.Workers, "workers", 8, "workers per process in the throughput case (it runs two processes)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 5*time.Second, "lease TTL for the failover case")
	fs.BoolVar(&cfg.NoSync, "no-sync", false, "do not fsync every write (compare with the durable default)")
	fs.StringVar(&only, "only", "", "comma-separated cases to run: dispatch,throughput,failover,fairness (default: these), autoscale (a scaled-time day, ~80s), owner (a real Astro site by mail; needs Node.js)")
	fs.StringVar(&packages, "packages", "", "owner case: the shared package cache to use, kept across runs (default: a fresh one, so the first install downloads)")
	var profile string
	fs.StringVar(&profile, "cpuprofile", "", "write this process's CPU profile to a file")
	if err := parse(fs, args); err != nil {
		return err
	}
	owner := false
	if only != "" {
		cfg.Only = strings.Split(only, ",")
		owner = slices.Contains(cfg.Only, "owner")
		cfg.Only = slices.DeleteFunc(cfg.Only, func(c string) bool { return c == "owner" })
	}
	if cfg.Workers < 1 || cfg.Workers > 256 {
		return fmt.Errorf("--workers %d: give 1 to 256 workers per process", cfg.Workers)
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if !owner || len(cfg.Only) > 0 {
		if err := bench.Run(ctx, cfg); err != nil {
			return err
		}
	}
	if owner {
		if err := benchOwner(ctx, os.Stdout, packages); err != nil {
			return fmt.Errorf("bench owner: %w", err)
		}
	}
	return nil
}
