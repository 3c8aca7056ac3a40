// Package brokertest is the conformance suite for the broker ports: one set of tests that every
// backend adapter runs against itself, so the claim protocol can rely on the same contracts
// whatever holds the queues and leases (the pattern of gocloud.dev's drivertest).
//
// A backend package calls it from a one-line conformance test:
//
//	func TestConformance(t *testing.T) { brokertest.Run(t, harness) }
//
// Every contract is a subtest with its own fresh backend, and the subtests run in parallel.
// They test exactly what the doc comments in package broker promise: leases (exclusivity,
// fencing tokens, expiry, compare-and-delete), the tenant inbox (FIFO, idempotent publish,
// counts, one delivery at a time, redelivery, retry, dead letters), claims (never
// de-duplicated), results, signals, job records, presence, and the common context contract
// (a cancelled ctx returns ctx.Err() unwrapped).
//
// Timing is read from the Harness, not guessed: tests that wait out a TTL sleep TTL plus the
// backend's declared expiry lag, and everything else polls for a condition with a deadline.
package brokertest
