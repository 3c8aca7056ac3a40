package broker

import (
	"context"

	"github.com/webordinary/webordinary/internal/tenant"
)

// ClaimStore is what a backend provides for the claim rules written once in SharedClaims: one
// versioned record per tenant, opaque bytes, each write conditioned on the version its writer
// read, and a watch that feeds every record to a process's index. It knows nothing of claims;
// a backend builds it from its engine's own calls (a KV bucket's Create, Update, Delete with a
// last revision and an ordered consumer; a locked map).
//
// Versions are the store's: any uint64 but 0 that changes with every write of a key. Safe for
// concurrent use; no method retries.
type ClaimStore interface {
	// Get reads t's record as the store holds it now. Version 0: t has none. A removed key
	// reads with a nil Value and the version of its removal (or 0 where the store forgets
	// removed keys).
	Get(ctx context.Context, t tenant.ID) (ClaimEntry, error)
	// Put stores value as t's record if the record is still at version (0: t has none) and
	// returns the new version; ErrConflict when another write came first.
	Put(ctx context.Context, t tenant.ID, value []byte, version uint64) (uint64, error)
	// Delete removes t's record if it is still at version; ErrConflict when another write
	// came first.
	Delete(ctx context.Context, t tenant.ID, version uint64) error
	// Watch feeds f every record the store holds, then every write and removal, in each
	// key's version order, until stop is called or the store closes. It calls f.Ready once
	// the records it held at the start were fed (or once it cannot go on: callers then fail
	// on the store). It may feed a record twice; f ignores versions it has.
	Watch(f ClaimFeed) (stop func(), err error)
}

// ClaimEntry is one tenant's record in a ClaimStore.
type ClaimEntry struct {
	Tenant tenant.ID
	// Value is the record; nil when the key was removed.
	Value   []byte
	Version uint64
}

// ClaimFeed receives a ClaimStore's records (see ClaimStore.Watch). Its methods are safe for
// concurrent use and do not block.
type ClaimFeed interface {
	// Apply takes one record, unless the feed holds a later version of its key.
	Apply(e ClaimEntry)
	// Ready says the records the store held when the watch started were all applied.
	Ready()
	// Reset forgets every record: the store started over (an engine lost its memory and its
	// versions with it); the watch feeds what it holds now.
	Reset()
}
