// Package broker defines the ports the claim protocol is written against: a tenant inbox
// (FIFO per tenant, with dead letters), the shared claims queue, the results stream, leases
// with fencing tokens, interrupt signals, worker presence and the job records store.
//
// Backends implement these interfaces in their own packages (natsjs for NATS JetStream, awsq
// for SQS + DynamoDB + S3, mem in process memory) and prove it by running brokertest.Run.
// Nothing here mentions a backend's types: a port speaks in tenants, jobs, tokens and durations.
//
// Behaviour every backend needs is written here once over a smaller driver: the front of a
// tenant's queue (OpenQueue, over a Table) and the claim rules (SharedClaims, over versioned
// records with conditional writes, and a watch or bells: ClaimStore, ClaimBells).
//
// Common contract for every method: ctx bounds how long it may block, and a cancelled ctx
// returns ctx.Err() unwrapped. Methods do not retry on their own unless their doc says so;
// the caller (worker, router, reconciler) owns retry policy. All implementations are safe for
// concurrent use.
package broker
