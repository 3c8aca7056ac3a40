package awsq

import "cmp"

// Resources names the AWS resources the backend uses for a prefix, for tools that create them
// (`webordinary aws setup`) and for the test that keeps deploy/aws's template in step with the
// code. Tenant and signal queues are created at run time, so only their name patterns appear.
type Resources struct {
	// Tables lists every DynamoDB table; each has the string key (pk HASH, sk RANGE).
	Tables []string
	// LeasesTable carries the sparse index ExpiryIndex on (live S HASH, expiresAt N RANGE), keys only.
	LeasesTable, ExpiryIndex string
	// TTLTables have items with the TTL attribute TTLAttribute (epoch seconds).
	TTLTables    []string
	TTLAttribute string
	// ClaimsQueue (standard) and ResultsQueue (FIFO) are the shared queues.
	ClaimsQueue, ResultsQueue string
	// TenantQueuePattern and SignalQueuePattern are IAM-style patterns of the run-time queues.
	TenantQueuePattern, SignalQueuePattern string
	// PayloadBucket is the default bucket for payloads too large for SQS.
	PayloadBucket string
}

// ResourcesFor returns the names for prefix (DefaultPrefix when empty).
func ResourcesFor(prefix string) Resources {
	n := newNames(cmp.Or(prefix, DefaultPrefix))
	return Resources{
		Tables: n.allTables(), LeasesTable: n.leases, ExpiryIndex: expiryIndex,
		TTLTables: []string{n.jobs, n.workers}, TTLAttribute: "expireAt",
		ClaimsQueue: n.claims, ResultsQueue: n.results,
		TenantQueuePattern: n.prefix + "-in*", SignalQueuePattern: n.signalQueue("*"),
		PayloadBucket: n.prefix + "-payloads",
	}
}
