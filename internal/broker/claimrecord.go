package broker

import (
	"encoding/json"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// claimRecord is a tenant's claim record: its outstanding request (since, when made, who
// holds it handed out and until when) or done, and the process that holds its workspace warm.
// Stored as JSON in a ClaimStore.
type claimRecord struct {
	Since time.Time `json:"since"`
	At    time.Time `json:"at"`
	Taker string    `json:"taker,omitempty"`
	Until time.Time `json:"until,omitzero"`
	Done  bool      `json:"done,omitempty"`
	// Warm is the taker that holds the tenant's workspace warm, preferred until WarmUntil.
	Warm      string    `json:"warm,omitempty"`
	WarmUntil time.Time `json:"warmUntil,omitzero"`
	// Asked is when a request last restated it: a repeat writes a new version (at most once
	// per ClaimsConfig.Restate), so a watch that missed the record gets it again.
	Asked time.Time `json:"asked,omitzero"`
}

// decodeClaim reads a stored record; a removed or unreadable one is done (no request, and the
// next write overwrites it).
func decodeClaim(value []byte) claimRecord {
	var v claimRecord
	if value == nil || json.Unmarshal(value, &v) != nil {
		return claimRecord{Done: true}
	}
	return v
}

func (v claimRecord) encode() []byte {
	data, _ := json.Marshal(v)
	return data
}

// excludes reports whether v's warm preference keeps taker from it at now.
func (v claimRecord) excludes(taker string, now time.Time) bool {
	return v.Warm != "" && v.Warm != taker && now.Before(v.WarmUntil)
}

// waiting: outstanding and not handed out (or handed out and its hand-out time passed).
func (v claimRecord) waiting(now time.Time) bool {
	return !v.Done && (v.Taker == "" || !now.Before(v.Until))
}

// handedOut reports whether v is outstanding and handed out at now.
func (v claimRecord) handedOut(now time.Time) bool { return !v.Done && !v.waiting(now) }

// merged returns the record after a request with since, and whether it must be written.
// exists is false when the tenant has no record.
func (v claimRecord) merged(exists bool, since, now time.Time, restate time.Duration) (claimRecord, bool) {
	switch {
	case !exists || v.Done:
		return claimRecord{Since: since, At: now, Warm: v.Warm, WarmUntil: v.WarmUntil}, true
	case v.handedOut(now):
		// Handed out and being decided: waiting again, in its place, so the request survives
		// a taker that drops the claim (its Ack will not match this version). Restated now.
		return claimRecord{Since: minTime(v.Since, since), At: v.At, Asked: now}, true
	case since.Before(v.Since):
		v.Since, v.Asked = since, now
		return v, true
	case now.Sub(latest(v.At, v.Asked)) >= restate:
		v.Asked = now // same place in line, new version
		return v, true
	}
	return v, false
}

// handOut returns v handed out to taker until until; a hand-out ends the warm preference.
func (v claimRecord) handOut(taker string, until time.Time) claimRecord {
	v.Taker, v.Until = taker, until
	v.Warm, v.WarmUntil = "", time.Time{}
	return v
}

// claimBefore orders waiting requests: oldest since, then made first, then by tenant.
func claimBefore(a claimRecord, at tenant.ID, b claimRecord, bt tenant.ID) bool {
	switch {
	case !a.Since.Equal(b.Since):
		return a.Since.Before(b.Since)
	case !a.At.Equal(b.At):
		return a.At.Before(b.At)
	case at.Project != bt.Project:
		return at.Project < bt.Project
	}
	return at.User < bt.User
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// earliest is the earlier of a and b, where zero is "none".
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
