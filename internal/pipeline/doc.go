// Package pipeline is the edit pipeline, the worker.Processor that does a job's real work:
// the tenant's workspace, the thread's branch, attachments, the agent, the build (with a
// repair turn), the preview deploy, and the commit and push — owned by the platform, never
// by the agent. Before each irreversible step (deploy, push) it checks that the tenant's lease
// is still this worker's.
//
// Effects once: every commit carries Command-Id and Thread-Id trailers, and a job redelivered
// after its commit exists only re-sends its result.
package pipeline
