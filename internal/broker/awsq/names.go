package awsq

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/webordinary/webordinary/internal/tenant"
)

// names derives every resource name from the prefix.
type names struct {
	prefix string
	// Tables.
	inbox, deadLetters, leases, jobs, workers, routes, tables, claimsTable string
	// Shared queues.
	claims, results string
}

func newNames(prefix string) names {
	return names{
		prefix:      prefix,
		inbox:       prefix + "_inbox",
		deadLetters: prefix + "_deadletters",
		leases:      prefix + "_leases",
		jobs:        prefix + "_jobs",
		workers:     prefix + "_workers",
		routes:      prefix + "_routes",
		tables:      prefix + "_tables",
		claimsTable: prefix + "_claims",
		claims:      prefix + "-claims",
		results:     prefix + "-results.fifo",
	}
}

// allTables lists the tables New creates.
func (n names) allTables() []string {
	return []string{n.inbox, n.deadLetters, n.leases, n.jobs, n.workers, n.routes, n.tables, n.claimsTable}
}

// tenantQueue is t's FIFO queue: "<prefix>-in_<project>_<user>.fifo", unambiguous because "_"
// cannot occur in a tenant part. A name over SQS's 80 characters becomes
// "<prefix>-inh_<start of project_user>_<10 hex of sha256(project/user)>.fifo"; the different
// marker ("-inh_") keeps the two forms from ever colliding.
func (n names) tenantQueue(t tenant.ID) string {
	full := n.prefix + "-in_" + t.Name() + ".fifo"
	if len(full) <= maxQueueName {
		return full
	}
	sum := sha256.Sum256([]byte(t.String()))
	head := n.prefix + "-inh_"
	tail := "_" + hex.EncodeToString(sum[:5]) + ".fifo"
	return head + t.Name()[:maxQueueName-len(head)-len(tail)] + tail
}

// signalQueue is the standard queue of one backend instance (process) for interrupts.
func (n names) signalQueue(process string) string { return n.prefix + "-sig-" + process }
