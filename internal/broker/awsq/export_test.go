package awsq

import "github.com/webordinary/webordinary/internal/tenant"

// WithFaults returns cfg with a hook called at the fault points of publish and ack.
func WithFaults(cfg Config, f func(point string) error) Config {
	cfg.faults = f
	return cfg
}

// QueueName is the SQS name of t's queue under prefix.
func QueueName(prefix string, t tenant.ID) string { return newNames(prefix).tenantQueue(t) }
