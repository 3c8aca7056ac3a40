// Package natsjs implements the broker ports on NATS JetStream: the embedded default (a NATS
// server inside the webordinary process, JetStream on the data directory) and, unchanged, an
// external server or cluster reached by URL.
//
// Layout on the server:
//
//	stream WO_IN       wo.in.<project>.<user>   work queue, fsync'd, no consumers: a tenant's owner reads its
//	                                            first message and removes the ones it has done together (queue.go);
//	                                            records the inbox's shards (metadata wo_inbox_shards)
//	stream WO_IN_<k>   wo.in<k>.<project>.<user> shard k of the inbox (k ≥ 1), the same; a tenant's shard is a hash of it
//	stream WO_RESULTS  wo.out.<project>.<user>  limits (7 days), fsync'd; consumer "router" (filtered to them)
//	                   wo.out.f.<project>.<user> the tenant's fence key: its newest lease's token, which a
//	                                            holder's result is published on the condition of (fence.go)
//	stream WO_RESULTS_<k> wo.out<k>.<project>.<user> result shard k (k ≥ 1), the same; a tenant's results go
//	                                            to the shard of its jobs' inbox shard
//	stream WO_DLQ      wo.dlq.<project>.<user>  limits (30 days)
//	KV wo_leases       <project>.<user>         per-key TTL; fencing token = revision at acquire
//	KV wo_jobs         <job id>                 job records; async persist on a single server
//	KV wo_workers      <worker id>              presence in memory, per-key TTL
//	KV wo_claims       <project>.<user>         claim requests in memory: one record per tenant (since, hand-out)
//	KV wo_t_<name>     (Table)                  projects, threads, mail index
//	core subject       wo.sig.<project>.<user>  interrupts and release requests (best effort)
//	core subject       wo.wake.<project>.<user> "a job was stored": wakes the tenant's owner waiting in Next
//
// Claims are a KV bucket rather than a queue because they are served in an order a stream
// cannot keep: oldest since first, one request per tenant. The rules are broker.SharedClaims';
// this package gives it the bucket as a broker.ClaimStore (claims.go) and the watch each
// backend instance reads it through (claimwatch.go).
package natsjs
