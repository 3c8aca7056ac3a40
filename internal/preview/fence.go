package preview

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/webordinary/webordinary/internal/broker"
)

// Fence is the lease a deploy's caller holds: its holder (a tenant, "project/user") and its
// fencing token (broker.Lease.Token), strictly increasing for the holder. Each pointer keeps,
// per holder, the newest token that switched it (Fences); a deploy carrying an older token of
// the same holder is refused with an error matching broker.ErrLeaseLost and switches nothing,
// so a newer owner's version is never replaced by a stale owner's. The check and the switch
// are one step in the store: a compare-and-set on the pointer (engine, S3), or on a Dir a
// flock on the project's directory that every process takes for its switches. Tokens of
// different holders are not compared: each holder's are its own sequence.
type Fence struct {
	Holder string
	Token  uint64
}

type fenceKey struct{}

// WithFence returns ctx carrying f: Deploy, DeployBaseline and DeployProduction under it are
// fenced by it. A zero token fences nothing.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceOf returns the fence ctx carries (WithFence); nil when none.
func FenceOf(ctx context.Context) *Fence {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	if !ok || f.Token == 0 {
		return nil
	}
	return &f
}

// Fences is what a pointer keeps: per holder, the newest token that switched it.
type Fences map[string]uint64

// Admit returns nil when a switch fenced by f may replace a pointer that keeps fs, else an
// error matching broker.ErrLeaseLost; what names the pointer in it. An unfenced switch (f
// nil) is admitted.
func (fs Fences) Admit(f *Fence, what string) error {
	if f == nil || fs[f.Holder] <= f.Token {
		return nil
	}
	return fmt.Errorf("%s was switched under a newer lease of %s (token %d, this deploy's %d): %w",
		what, f.Holder, fs[f.Holder], f.Token, broker.ErrLeaseLost)
}

// With returns the fences a switch fenced by f stores: a copy of fs with f's token, or fs as
// it is when the switch is unfenced (an unfenced switch keeps what the pointer kept).
func (fs Fences) With(f *Fence) Fences {
	if f == nil {
		return fs
	}
	out := maps.Clone(fs)
	if out == nil {
		out = Fences{}
	}
	out[f.Holder] = f.Token
	return out
}

// String encodes fs as "holder=token" pairs, comma-separated, sorted (for an object's
// metadata); ParseFences reads it back.
func (fs Fences) String() string {
	pairs := make([]string, 0, len(fs))
	for _, h := range slices.Sorted(maps.Keys(fs)) {
		pairs = append(pairs, h+"="+strconv.FormatUint(fs[h], 10))
	}
	return strings.Join(pairs, ",")
}

// ParseFences reads what Fences.String wrote; "" is none.
func ParseFences(s string) (Fences, error) {
	if s == "" {
		return nil, nil
	}
	fs := Fences{}
	for pair := range strings.SplitSeq(s, ",") {
		h, tok, ok := strings.Cut(pair, "=")
		n, err := strconv.ParseUint(tok, 10, 64)
		if !ok || err != nil || h == "" {
			return nil, fmt.Errorf("preview: unreadable fences %q", s)
		}
		fs[h] = n
	}
	return fs, nil
}
