// Package router accepts instructions for tenants and makes sure some worker will run them.
//
// Submit validates a request, records the job, publishes it on the tenant's queue, then reads
// the tenant's lease: no live lease → a claim request; a live lease → an interrupt for the
// running job when the tenant's policy says so. The publish comes before the lease read so a
// release racing the submission cannot strand the job (the releasing worker looks at the
// pending count after deleting its lease). Run adds the safety nets: claims for tenants whose
// lease expired, a periodic reconciler for tenants with pending jobs and no owner, and the
// results consumer that hands outcomes on (to replies, later).
package router
