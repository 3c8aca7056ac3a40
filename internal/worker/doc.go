// Package worker is the generic worker of the claim protocol: it takes claim requests from the
// shared claims queue, acquires the tenant's lease, runs the tenant's jobs in order through a
// Processor while heartbeating the lease and the job, and releases the tenant when it has been
// idle for a while — or early, when other tenants are waiting for a worker.
//
// Order of operations that keeps "nothing stuck" true (see ARCHITECTURE.md): on release the
// worker closes the tenant's queue, then compare-and-deletes the lease, then reads the
// tenant's pending count and requests a claim when it is not zero.
package worker
