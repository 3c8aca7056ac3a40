package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// fences keeps each tenant's fence key in its result shard: subject "<shard's subject>f.<p>.<u>"
// (wo.out.f.site.alice), whose value is the token of the tenant's newest lease acquisition.
// Leases.Acquire raises it (a compare-and-set from the key it read, never to a lower token)
// before it returns, and a holder's result is published on the condition that the key is still
// at the sequence that carries the holder's token (Nats-Expected-Last-Subject-Sequence with
// the fence key as its subject): once a newer owner acquired the tenant, the stream itself
// refuses the older owner's result. A fence key that is missing (aged out with the stream's
// MaxAge) or carries an older token is raised by the next holder that needs it.
type fences struct {
	a  *adapter
	mu sync.Mutex
	// seen is each tenant's fence key as this process last wrote or read it (bounded).
	seen map[string]fenceMark
}

// fenceMark is a fence key's token and its stream sequence (0: no key).
type fenceMark struct{ token, seq uint64 }

func (sh resultShard) fenceSubject(t tenant.ID) string { return sh.subject + "f." + t.Subject() }

// shard is t's result shard.
func (f *fences) shard(t tenant.ID) resultShard {
	return f.a.results[shardIndex(t, len(f.a.results))]
}

// mark returns t's fence key carrying token: the one remembered, unless reread, else read,
// and raised to token when it carries an older one. ErrLeaseLost when it carries a newer one.
func (f *fences) mark(ctx context.Context, t tenant.ID, token uint64, reread bool) (fenceMark, error) {
	if m, ok := f.remembered(t); ok && m.token == token && !reread {
		return m, nil
	}
	for range maxFenceTries {
		m, err := f.read(ctx, t)
		switch {
		case err != nil:
			return m, err
		case m.token > token:
			return m, fmt.Errorf("natsjs: tenant %s was acquired with token %d, after %d: %w", t, m.token, token, broker.ErrLeaseLost)
		case m.token == token:
			f.remember(t, m)
			return m, nil
		}
		m, err = f.raise(ctx, t, token, m.seq)
		if !errors.Is(err, broker.ErrConflict) {
			return m, err
		}
	}
	return fenceMark{}, fmt.Errorf("natsjs: the fence of %s keeps changing; try again", t)
}

// maxFenceTries bounds mark's compare-and-set attempts.
const maxFenceTries = 5

// read gets t's fence key from its result shard.
func (f *fences) read(ctx context.Context, t tenant.ID) (fenceMark, error) {
	sh := f.shard(t)
	m, err := sh.stream.GetLastMsgForSubject(ctx, sh.fenceSubject(t))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fenceMark{}, nil
	}
	if err != nil {
		return fenceMark{}, ctxErr(ctx, fmt.Errorf("natsjs: read the fence of %s: %w", t, err))
	}
	token, err := strconv.ParseUint(string(m.Data), 10, 64)
	if err != nil {
		return fenceMark{}, fmt.Errorf("natsjs: the fence of %s: %w", t, err)
	}
	return fenceMark{token: token, seq: m.Sequence}, nil
}

// raise writes token to t's fence key if it is still at seq; broker.ErrConflict when it is not.
func (f *fences) raise(ctx context.Context, t tenant.ID, token, seq uint64) (fenceMark, error) {
	sh := f.shard(t)
	ack, err := f.a.js.Publish(ctx, sh.fenceSubject(t), []byte(strconv.FormatUint(token, 10)),
		jetstream.WithExpectLastSequencePerSubject(seq))
	if isWrongLastSeq(err) {
		return fenceMark{}, broker.ErrConflict
	}
	if err != nil {
		return fenceMark{}, ctxErr(ctx, fmt.Errorf("natsjs: raise the fence of %s: %w", t, err))
	}
	m := fenceMark{token: token, seq: ack.Sequence}
	f.remember(t, m)
	return m, nil
}

func (f *fences) remembered(t tenant.ID) (fenceMark, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.seen[t.Subject()]
	return m, ok
}

func (f *fences) remember(t tenant.ID, m fenceMark) {
	f.mu.Lock()
	defer f.mu.Unlock()
	putBounded(&f.seen, t.Subject(), m)
}
