package broker

import (
	"context"
	"errors"

	"github.com/webordinary/webordinary/internal/tenant"
)

// RecordStore is the storage a backend gives UpdateRecord, the compare-and-set loop of
// Jobs.Update written once: a record read with its version, and a write on the condition that
// the version is unchanged.
type RecordStore interface {
	// ReadRecord returns id's record and its version, or ErrNotFound.
	ReadRecord(ctx context.Context, id string) (JobRecord, uint64, error)
	// WriteRecord stores rec as id's record if its version is still version: ErrConflict when
	// it is not. With h, the store also requires h's lease to be the tenant's live one, in the
	// same step (ErrLeaseLost when it is not); a store without FencedJobs is never given one.
	WriteRecord(ctx context.Context, id string, rec JobRecord, version uint64, h *Holder) error
}

// CachedRecords is an optional capability of RecordStore: the record as this client last wrote
// it, so an update can start without a read (the write's condition still refuses it if anyone
// wrote since).
type CachedRecords interface {
	// LastWritten returns a fresh copy of id's record as this client last wrote it, and its
	// version; false when it has none.
	LastWritten(id string) (JobRecord, uint64, bool)
}

// Holder is a lease holder a fenced write is conditioned on: t's live lease carries Token.
type Holder struct {
	Tenant tenant.ID
	Token  uint64
}

// UpdateRecord is Jobs.Update (and, with h, FencedJobs.UpdateFenced) over s: read, apply fn,
// write on the version read; a lost race reads again. It starts from the record this client
// last wrote where s remembers it, and reads when fn refuses that one (fn judges the current
// record, and the remembered one may be behind).
func UpdateRecord(ctx context.Context, s RecordStore, id string, fn func(*JobRecord) error, h *Holder) (JobRecord, error) {
	var rec JobRecord
	var version uint64
	cached := false
	if c, ok := s.(CachedRecords); ok {
		rec, version, cached = c.LastWritten(id)
	}
	for {
		if !cached {
			if err := ctx.Err(); err != nil {
				return JobRecord{}, err
			}
			var err error
			if rec, version, err = s.ReadRecord(ctx, id); err != nil {
				return rec, err
			}
		}
		if err := fn(&rec); err != nil {
			if cached {
				cached = false
				continue
			}
			return rec, err
		}
		err := s.WriteRecord(ctx, id, rec, version, h)
		if errors.Is(err, ErrConflict) {
			cached = false
			continue
		}
		return rec, err
	}
}
