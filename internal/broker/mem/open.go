package mem

import (
	"context"
	"fmt"

	"github.com/webordinary/webordinary/internal/broker"
)

// Scheme is this backend's broker.Open scheme: mem:// opens a new engine in this process
// (nothing is kept after Close; only this process's components can reach it).
const Scheme = "mem"

func init() { broker.Register(Scheme, open) }

func open(_ context.Context, url string, _ broker.Options) (*broker.Backend, error) {
	if url != Scheme+"://" {
		return nil, fmt.Errorf("mem: %q: want mem:// (it takes no address or options)", url)
	}
	b := New(Config{})
	b.Describe = "in-memory engine (nothing is kept after exit; only this process can reach it)"
	return b, nil
}
