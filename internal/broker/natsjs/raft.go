package natsjs

import (
	"sync"
	"time"
	_ "unsafe" // go:linkname

	_ "github.com/nats-io/nats-server/v2/server" // the variables below are its
)

// nats-server times its raft groups with package variables it does not expose as options: a
// follower that has heard nothing from its leader for a random 4–9 s starts an election, and
// an idle leader says it is alive every second. After a member is killed, every stream,
// bucket and consumer it led waits that long for a new leader, and so does webordinary's
// work. A serve whose embedded server is a cluster member sets shorter ones: elections after
// 2.5–4.5 s, with a heartbeat every 250 ms. A leader beats only when it has sent nothing for
// a beat, so beats can be up to two apart: five inside the shortest timeout (nats-server's
// own: two). The shortest is not lower because a member of an older webordinary (or a
// nats-server) that leads still beats up to 2 s apart, and a member that gave up on it
// sooner would call elections all through a rolling upgrade (raft has no pre-vote here).
// nats-server's test suite runs its clusters at 1.5–3.5 s. An external nats-server keeps its
// own timing: these variables are this process's.
//
// If nats-server renames one of them the build fails at link time ("relocation target …
// not defined"); TestEmbeddedEnginesFormACluster checks they are in force.

//go:linkname raftMinElection github.com/nats-io/nats-server/v2/server.minElectionTimeout
var raftMinElection time.Duration

//go:linkname raftMaxElection github.com/nats-io/nats-server/v2/server.maxElectionTimeout
var raftMaxElection time.Duration

//go:linkname raftHeartbeat github.com/nats-io/nats-server/v2/server.hbInterval
var raftHeartbeat time.Duration

// The embedded cluster's raft timing.
const (
	clusterMinElection = 2500 * time.Millisecond
	clusterMaxElection = 4500 * time.Millisecond
	clusterHeartbeat   = 250 * time.Millisecond
)

var fastElections sync.Once

// useFastElections sets the embedded cluster's raft timing, once per process and before its
// first server starts: the variables are read without a lock by every raft group's goroutines.
func useFastElections() {
	fastElections.Do(func() {
		raftMinElection, raftMaxElection, raftHeartbeat = clusterMinElection, clusterMaxElection, clusterHeartbeat
	})
}
