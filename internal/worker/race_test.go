//go:build race

package worker_test

// raceDetector: the race detector slows every goroutine several times over, unevenly, so
// tests that compare waiting times are skipped under it.
const raceDetector = true
