package awstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The start scripts: each binds 127.0.0.1 on a port the kernel picks and prints it.
const (
	fauxqsScript = `import { buildApp } from "fauxqs";
const app = buildApp({ logger: false });
await app.listen({ port: 0, host: "127.0.0.1" });
console.log("LISTENING " + app.server.address().port);`

	// dynalite throws on a request whose client went away mid-body (a Go client whose context
	// ended), which ends the process and every later test's backend with it: a reset by the
	// client is logged and survived; anything else still ends the process.
	dynaliteScript = `process.on("uncaughtException", (e) => {
  if (e && e.code === "ECONNRESET") { console.error("dynalite: a client went away mid-request"); return; }
  console.error(e); process.exit(1);
});
const dynalite = require("dynalite");
const s = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
s.listen(0, "127.0.0.1", () => console.log("LISTENING " + s.address().port));`

	sesScript = `require("aws-ses-v2-local").default({ host: "127.0.0.1", port: 0 })
  .then((s) => console.log("LISTENING " + s.address().port));`
)

// StartFauxQS starts fauxqs (SQS, SNS and S3 on one endpoint).
func StartFauxQS(ctx context.Context) (*Emulator, error) {
	if err := installed("fauxqs"); err != nil {
		return nil, err
	}
	return startNode(ctx, "fauxqs", fauxqsScript, true)
}

// StartDynalite starts dynalite (DynamoDB without transactions or TTL).
func StartDynalite(ctx context.Context) (*Emulator, error) {
	if err := installed("dynalite"); err != nil {
		return nil, err
	}
	return startNode(ctx, "dynalite", dynaliteScript, false)
}

// StartSES starts aws-ses-v2-local (SES v2 SendEmail; GET /store lists what was sent).
func StartSES(ctx context.Context) (*Emulator, error) {
	if err := installed("aws-ses-v2-local"); err != nil {
		return nil, err
	}
	return startNode(ctx, "ses", sesScript, false)
}

// shared holds the emulators a test binary started, one of each kind.
var shared struct {
	sync.Mutex
	started map[string]*Emulator
	failed  map[string]error
}

// get returns the shared emulator of kind, starting it on first use. A missing emulator skips
// the test, or fails it under CI=true.
func get(t testing.TB, kind string, start func(context.Context) (*Emulator, error)) *Emulator {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if e := shared.started[kind]; e != nil {
		return e
	}
	err := shared.failed[kind]
	if err == nil {
		var e *Emulator
		if e, err = start(context.Background()); err == nil {
			if shared.started == nil {
				shared.started = map[string]*Emulator{}
			}
			shared.started[kind] = e
			return e
		}
		if shared.failed == nil {
			shared.failed = map[string]error{}
		}
		shared.failed[kind] = err
	}
	unavailable(t, kind, err)
	return nil
}

// unavailable skips t for a missing emulator, or fails it under CI or when it is broken.
func unavailable(t testing.TB, kind string, err error) {
	t.Helper()
	if errors.Is(err, errMissing) && os.Getenv("CI") != "true" {
		t.Skipf("emulator %s unavailable, test skipped: %v", kind, err)
	}
	t.Fatalf("emulator %s: %v", kind, err)
}

// StartOwnDynalite starts a dynalite for t alone (not the shared one: for a test that may
// break it) and stops it when t ends.
func StartOwnDynalite(t testing.TB) string {
	t.Helper()
	e, err := StartDynalite(context.Background())
	if err != nil {
		unavailable(t, "dynalite", err)
	}
	t.Cleanup(e.Stop)
	return e.URL
}

// FauxQS returns the shared fauxqs endpoint (SQS, SNS, S3), starting it on first use.
func FauxQS(t testing.TB) string { t.Helper(); return get(t, "fauxqs", StartFauxQS).URL }

// Dynalite returns the shared dynalite endpoint, starting it on first use.
func Dynalite(t testing.TB) string { t.Helper(); return get(t, "dynalite", StartDynalite).URL }

// SES returns the shared aws-ses-v2-local endpoint, starting it on first use.
func SES(t testing.TB) string { t.Helper(); return get(t, "ses", StartSES).URL }

// DynamoDBLocal returns the shared DynamoDB Local endpoint, starting it on first use. It needs
// Java, root (for its private network namespace) and the jar from .ci/aws-emulators; without
// them the test is skipped, also under CI (the fidelity run is optional), with the reason.
func DynamoDBLocal(t testing.TB) string {
	t.Helper()
	if err := ddbLocalPossible(); err != nil {
		t.Skipf("fidelity run on DynamoDB Local skipped: %v", err)
	}
	return get(t, "dynamodb-local", StartDynamoDBLocal).URL
}

// Main runs the tests of a package that uses the shared emulators and stops them afterwards.
// Use it as: func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops every shared emulator this process started.
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	for kind, e := range shared.started {
		e.Stop()
		delete(shared.started, kind)
	}
}

// ddbLocalPossible says why DynamoDB Local cannot run here, or nil.
func ddbLocalPossible() error {
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("no java on PATH")
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root: its private network namespace needs unshare -n")
	}
	return nil
}

// ddbLocalJar finds DynamoDBLocal.jar in the install directory.
func ddbLocalJar() (string, error) {
	m, _ := filepath.Glob(filepath.Join(Dir(), "ddblocal", "package", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	if len(m) == 0 {
		return "", fmt.Errorf("DynamoDBLocal.jar: %w in %s/ddblocal (run .ci/aws-emulators with java present)", errMissing, Dir())
	}
	return m[len(m)-1], nil
}
