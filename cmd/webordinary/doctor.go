package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/webordinary/webordinary/internal/capability"
)

// runDoctor lists the parts outside the program (bubblewrap, Chromium, the AWS emulators...)
// with what each gives and how to get the missing ones. The tests skip through the same
// probes, so after `go test ./...` this is the list of what they skipped and why.
func runDoctor(_ context.Context, args []string) error {
	fs := newFlags("doctor", "list the parts outside this program that it and its tests use, and how to get the missing ones")
	if err := parse(fs, args); err != nil {
		return err
	}
	doctor(os.Stdout, capability.All())
	return nil
}

// doctor writes one line per part, and how to get each missing one.
func doctor(w io.Writer, parts []*capability.Part) {
	fmt.Fprintln(w, "webordinary doctor: the parts outside this program, what each gives, how to get what is missing")
	missing := 0
	for _, p := range parts {
		if err := p.Check(); err != nil {
			missing++
			fmt.Fprintf(w, "  %s  %-14s %s (%v)\n  %9s %-14s get it: %s\n", paint("31", "missing"), p.Name, p.Gives, err, "", "", p.Get)
			continue
		}
		fmt.Fprintf(w, "  %s       %-14s %s\n", paint("32", "ok"), p.Name, p.Gives)
	}
	if missing == 0 {
		fmt.Fprintln(w, "Everything is here: no test skips for want of a part.")
		return
	}
	fmt.Fprintf(w, "%d of %d missing: the tests that need them skip and say so (under CI=true they fail; .ci/run installs them).\n", missing, len(parts))
}
