package broker

import (
	"context"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// ClaimRecords is the storage every claim store gives the claim rules written once in
// SharedClaims: one versioned record per tenant, opaque bytes, each write conditioned on the
// version its writer read. It knows nothing of claims; a backend builds it from its engine's
// own calls (a KV bucket's Create, Update and Delete with a last revision; DynamoDB's
// conditional PutItem and DeleteItem; a locked map).
//
// Versions are the store's: any uint64 but 0 that changes with every write of a key. Safe for
// concurrent use; no method retries.
type ClaimRecords interface {
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
}

// ClaimStore is ClaimRecords with a watch (NewClaims): each process keeps an index of the
// records and its workers take from it (mem, natsjs).
type ClaimStore interface {
	ClaimRecords
	// Watch feeds f every record the store holds, then every write and removal, in each
	// key's version order, until stop is called or the store closes. It calls f.Ready once
	// the records it held at the start were fed (or once it cannot go on: callers then fail
	// on the store). It may feed a record twice; f ignores versions it has.
	Watch(f ClaimFeed) (stop func(), err error)
}

// ClaimBells is ClaimRecords with doorbells instead of a watch (NewBelledClaims), for an
// engine that cannot feed every process every write cheaply (SQS + DynamoDB): a request that
// becomes waiting rings; an idle Next anywhere receives the bell, reads every record and takes
// the oldest waiting one. The bell stays with the claim until its Ack spends it; a bell
// neither spent nor snoozed rings again after the claims' AckWait, so a hand-out that ran
// out is answered again.
type ClaimBells interface {
	ClaimRecords
	// List reads every record the store holds (removed ones need not be listed), consistently:
	// a write that returned before List began is in it.
	List(ctx context.Context) ([]ClaimEntry, error)
	// Ring sends a bell, received by one Wait here or in another process, at least once.
	Ring(ctx context.Context) error
	// Wait blocks until a bell arrives or ctx ends (ctx.Err()).
	Wait(ctx context.Context) (Bell, error)
}

// Bell is one received ring (see ClaimBells).
type Bell interface {
	// Done spends the bell. Idempotent.
	Done(ctx context.Context) error
	// Snooze rings it again d from now.
	Snooze(ctx context.Context, d time.Duration) error
	// Drop gives it back to ring again at once; best effort, it does not block for long.
	Drop()
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
