package natsjs

import (
	"os"
	"runtime"
	"sync"
)

// An engine that fsyncs every write runs in a process with more Ps (GOMAXPROCS) than cores.
// The server syncs each stream's writes in that stream's goroutine, and a goroutine in
// fsync keeps its P: the runtime gives the P to another goroutine only when sysmon, which
// sleeps 20 µs to 10 ms between looks, finds it still there. An fsync here takes 150–300 µs,
// and the inbox and result shards, the leases and the tables sync in parallel, so on 2 cores
// both Ps were often waiting on the disk with goroutines ready to run: the 100×20 end-to-end
// bench left 0.5–0.8 of its 2 cores idle while submits took 3–4 ms. With GOMAXPROCS 4, 8, 16
// or 32 in the process that holds the engine it ran alike, and faster than with 2 (ARCHITECTURE:
// "Ps for an engine that syncs"). A GOMAXPROCS in the environment is the user's choice and
// is kept.
var syncProcsOnce sync.Once

// raiseProcsForSyncs gives the process syncProcs's Ps, once: a second engine in the same
// process (tests) adds none.
func raiseProcsForSyncs() {
	syncProcsOnce.Do(func() {
		cur := runtime.GOMAXPROCS(0)
		if n := syncProcs(cur, os.Getenv("GOMAXPROCS")); n != cur {
			runtime.GOMAXPROCS(n)
		}
	})
}

// syncProcs is how many Ps a process holding a syncing engine runs with, given its Ps now
// (the runtime's default: the cores, or the container's CPU limit) and the environment's
// GOMAXPROCS: twice as many, at least four more; as many when the environment says.
func syncProcs(cur int, env string) int {
	if env != "" {
		return cur
	}
	return cur + max(cur, 4)
}
