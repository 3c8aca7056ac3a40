package natsjs

import "time"

// RaftTiming is the raft timing nats-server runs with in this process, and the embedded
// cluster's: elections after min–max without a heartbeat, which comes every hb.
func RaftTiming() (inForce, cluster [3]time.Duration) {
	return [3]time.Duration{raftMinElection, raftMaxElection, raftHeartbeat},
		[3]time.Duration{clusterMinElection, clusterMaxElection, clusterHeartbeat}
}

// AcquireOnceExpired acquires tn for "b" once its current lease has run out.
var AcquireOnceExpired = acquireOnceExpired
