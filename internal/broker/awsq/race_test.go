//go:build race

package awsq_test

// raceDetector: .ci/run runs this package a second time under the race detector, for the
// adapter's own goroutines. What only repeats the plain run against slower emulators (the
// DynamoDB Local fidelity run, the call count over real time) is skipped there.
const raceDetector = true
