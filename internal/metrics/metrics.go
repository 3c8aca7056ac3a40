// Package metrics defines webordinary's Prometheus metrics in one place, registered on
// Registry (served by serve at /metrics). Labels have small, fixed value sets: there is never
// one series per tenant or job.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry holds every webordinary metric plus the Go and process collectors.
var Registry = prometheus.NewRegistry()

var (
	// Claims counts claim requests handled by outcome: acquired, held (another owner),
	// no_work (nothing pending), error.
	Claims = counterVec("webordinary_claims_total", "Claim requests handled, by outcome.", "outcome")
	// ClaimWait is the time from a claim request to the lease being acquired.
	ClaimWait = histogram("webordinary_claim_wait_seconds", "Time from a claim request to its tenant's lease being acquired.",
		[]float64{.001, .005, .01, .05, .1, .5, 1, 5, 15, 60})
	// Jobs counts finished jobs by final state.
	Jobs = counterVec("webordinary_jobs_total", "Jobs finished, by final state (done, failed, interrupted, dead).", "state")
	// JobDuration is a job's run time, by final state.
	JobDuration = histogramVec("webordinary_job_duration_seconds", "Job run time, by final state.",
		[]float64{.01, .1, .5, 1, 5, 15, 30, 60, 120, 300, 900}, "state")
	// StageDuration is the time of one pipeline stage: git, agent, build, deploy, commit, push.
	StageDuration = histogramVec("webordinary_stage_duration_seconds", "Edit pipeline stage durations.",
		[]float64{.01, .05, .1, .5, 1, 5, 15, 60, 300}, "stage")
	// LeasesHeld is how many tenants this process's workers own.
	LeasesHeld = gauge("webordinary_leases_held", "Tenants owned by this process's workers.")
	// Releases counts tenant releases by reason: idle, early (others waiting), empty (a claim
	// that found nothing to do), operator, lost (the lease was lost).
	Releases = counterVec("webordinary_releases_total", "Tenant releases, by reason.", "reason")
	// Interrupts counts running jobs interrupted.
	Interrupts = counter("webordinary_interrupts_total", "Running jobs interrupted by a newer instruction or an operator.")
	// DeadLetters counts jobs moved to a dead-letter queue.
	DeadLetters = counter("webordinary_dead_letters_total", "Jobs moved to a tenant's dead-letter queue.")
	// Pending is the number of accepted jobs not yet finished, over all tenants.
	Pending = gauge("webordinary_pending_jobs", "Jobs accepted and not yet finished, all tenants together.")
	// TenantsWaiting is the number of tenants with pending jobs and no owner.
	TenantsWaiting = gauge("webordinary_tenants_waiting", "Tenants with pending jobs and no owner.")
	// WorkersWanted is the autoscaling signal: tenants with pending work (queued or running),
	// owned or not, i.e. how many workers could be busy now. Measured by serve's reconciler.
	WorkersWanted = gauge("webordinary_workers_wanted", "Workers that could be busy now: tenants with pending jobs, owned or not.")
	// OldestWait is how long the longest-waiting tenant with pending work and no owner has
	// waited for a worker, in seconds (0: none waits). Measured by serve's reconciler.
	OldestWait = gauge("webordinary_oldest_wait_seconds", "How long the longest-waiting unowned tenant with pending jobs has waited for a worker.")
	// MailIn counts inbound messages by decision: run, hold, ignore, refuse, retry, quarantine.
	MailIn = counterVec("webordinary_mail_in_total", "Inbound email, by decision.", "decision")
	// MailQuarantined counts inbound messages set aside in the spool's quarantine, by kind:
	// rejected (unparseable or over the parse budget), unreadable (a broken spool entry).
	MailQuarantined = counterVec("webordinary_mail_quarantined_total", "Inbound email set aside in the quarantine, by kind.", "kind")
	// MailHeld counts inbound messages held because their sender was over a limit.
	MailHeld = counter("webordinary_mail_held_total", "Inbound email held because its sender was over a limit (released or dropped by an operator).")
	// MailOut counts replies by outcome: queued, sent, failed.
	MailOut = counterVec("webordinary_mail_out_total", "Outbound replies, by outcome.", "outcome")
	// PackageInstalls counts installs of a site with a lockfile by what the shared package
	// cache did: hit (copied from it), filled (filled beside the install), fill_failed.
	PackageInstalls = counterVec("webordinary_package_cache_installs_total", "Installs of a site with a lockfile, by what the shared package cache did (hit, filled, fill_failed).", "outcome")
	// PackageCacheBytes is the shared package cache's size, measured after each fill.
	PackageCacheBytes = gauge("webordinary_package_cache_bytes", "Size of the shared package cache, measured after each fill.")
	// ModuleInstalls counts installs through the prepared node_modules store by outcome:
	// hit (taken from it), built (prepared for this install), build_failed, graft_failed
	// (the site's own install ran instead).
	ModuleInstalls = counterVec("webordinary_modules_installs_total", "Installs through the prepared node_modules store, by outcome (hit, built, build_failed, graft_failed).", "outcome")
	// ModulesBytes is the prepared node_modules store's size, measured after each build.
	ModulesBytes = gauge("webordinary_modules_bytes", "Size of the prepared node_modules store, measured after each build.")
	// AgentCost is the agents' reported spend.
	AgentCost = counter("webordinary_agent_cost_usd_total", "Agent spend reported by the agents, in US dollars.")
)

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

func counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	Registry.MustRegister(c)
	return c
}

func counterVec(name, help, label string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	Registry.MustRegister(c)
	return c
}

func gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	Registry.MustRegister(g)
	return g
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	Registry.MustRegister(h)
	return h
}

func histogramVec(name, help string, buckets []float64, label string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{label})
	Registry.MustRegister(h)
	return h
}
