// Package mem implements every broker port in process memory: the second backend, which
// proves the ports describe the claim protocol rather than JetStream, and makes protocol tests
// fast (the model is gocloud.dev's mempubsub).
//
// An Engine holds the state; each Connect returns a Backend that behaves like a separate
// client of it (a worker process's connection): closing one cuts only that client, the way a
// crashed process loses its connection, while the others go on. New is the one-client short
// cut. Nothing is written to disk and nothing survives Engine.Close.
//
// Semantics follow natsjs wherever the ports leave room, so a test that passes here passes
// there:
//
//   - jobs, results and records travel as JSON (a round trip, never a shared pointer), and a
//     job or result larger than Config.MaxMessageSize is broker.ErrTooLarge;
//   - a tenant queue delivers one message at a time (MaxAckPending 1), a retried message stays
//     first in line, and Open replaces the previous holder's consumer, so its unsettled
//     delivery comes again at once;
//   - Publish of a job or result is de-duplicated by id within Config.DedupWindow;
//   - fencing tokens come from one counter per Engine, so they increase strictly across all
//     tenants, and a lease's expiry is exact: it is gone the instant its ExpiresAt passes
//     (Harness.ExpiryLag 0), and Leases.Expired reports it then;
//   - claims and results left unacknowledged come again after Config.ClaimAckWait and
//     Config.ResultAckWait; claims are broker.SharedClaims over a versioned map (claims.go),
//     as natsjs's are over its bucket.
//
// Every method takes the calling context as the broker package says: a context already done
// returns ctx.Err() unwrapped before anything is changed, and blocking calls return it when it
// ends. A closed client returns ErrClosed. The package starts no goroutine of its own: waits
// run on the caller's goroutine, and lease expiry and context ends use runtime timers
// (time.AfterFunc, context.AfterFunc), all stopped by Close.
package mem
