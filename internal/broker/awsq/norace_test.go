//go:build !race

package awsq_test

const raceDetector = false
