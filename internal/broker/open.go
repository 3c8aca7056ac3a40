package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// ErrUnknownScheme: no backend is registered for a URL's scheme (its package is not linked in).
var ErrUnknownScheme = errors.New("unknown backend scheme")

// Options are what a backend may need beyond its URL. Each backend reads the fields it knows
// and ignores the others.
type Options struct {
	// User and Password authenticate this process to the engine. An embedded engine requires
	// them of every client (a URL's own credentials take precedence for an external one).
	User, Password string
	// Listen is where an embedded engine accepts other processes (host:port; port 0 picks a
	// free one); empty keeps it in-process only.
	Listen string
	// NoSync relaxes an embedded engine's fsync-per-write to periodic syncs.
	NoSync bool
	// Logger receives the backend's own logs. Default slog.Default().
	Logger *slog.Logger
}

// OpenFunc opens a backend from its URL (the whole string, as given: a scheme may allow a
// comma-separated list of servers). The returned Backend's Close releases everything it
// opened: connections and, for an embedded engine, the engine itself.
type OpenFunc func(ctx context.Context, url string, opts Options) (*Backend, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]OpenFunc{}
)

// Register makes a backend available to Open under scheme (as in "scheme://..."). Backend
// packages call it from init; registering a scheme twice panics.
func Register(scheme string, open OpenFunc) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("broker: scheme " + scheme + " registered twice")
	}
	openers[scheme] = open
}

// Schemes lists the registered schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	var out []string
	for s := range openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Open opens the backend url names, e.g. embedded:///var/lib/webordinary/nats,
// nats://host:4222 or mem://. The scheme picks the backend; what follows is the backend's.
// It does not retry: a backend that cannot be reached is an error at once.
func Open(ctx context.Context, url string, opts Options) (*Backend, error) {
	scheme, _, ok := strings.Cut(url, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("backend URL %q: want scheme://…, one of %s", url, strings.Join(Schemes(), ", "))
	}
	openersMu.RLock()
	open, ok := openers[scheme]
	openersMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("backend URL %q: %w %q (known: %s)", url, ErrUnknownScheme, scheme, strings.Join(Schemes(), ", "))
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	b, err := open(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	if b.Close == nil {
		b.Close = func() error { return nil }
	}
	return b, nil
}
