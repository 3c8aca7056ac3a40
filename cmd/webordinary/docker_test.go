package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestDockerfileServeStarts runs what the image runs, without Docker (none in CI): the
// Dockerfile's ENV, ENTRYPOINT and CMD as a process (ports made :0, the data directory a
// temporary one), its HEALTHCHECK command against it, and compose.yaml's worker command
// joining it. serve must start, print its generated token once, and answer the health check.
func TestDockerfileServeStarts(t *testing.T) {
	t.Parallel()
	img := readDockerfile(t, "../../Dockerfile")
	comp := readCompose(t, "../../compose.yaml")
	if img.env["WO_SANDBOX"] == "required" {
		if _, err := exec.LookPath("bwrap"); err != nil {
			t.Skip("the image requires bubblewrap, which this machine lacks")
		}
	}
	c := &cluster{t: t, dir: reachableTempDir(t)}
	ready := filepath.Join(c.dir, "ready.json")
	env := img.processEnv(c.data(), comp.Services["serve"].Environment)
	serve := exec.Command(os.Args[0], append(img.cmd, "--ready-file", ready)...)
	serve.Env = append(env, "WO_TEST_AS_MAIN=1")
	c.serveP = c.startCmd(serve)
	t.Cleanup(c.stopAll)
	c.api, c.nats = waitReady(t, ready)
	c.api = "http://127.0.0.1:" + port(t, c.api) // it listens on every address, as in a container
	if log := readFile(t, filepath.Join(c.dir, "procs.log")); !strings.Contains(log, "A new API and dashboard token was generated") {
		t.Fatalf("serve did not print its new token:\n%s", log)
	}
	health := exec.Command(os.Args[0], replaceAll(img.health[1:], "http://127.0.0.1:8080", c.api)...)
	health.Env = append(env, "WO_TEST_AS_MAIN=1")
	if out, err := health.CombinedOutput(); err != nil {
		t.Fatalf("HEALTHCHECK %v: %v\n%s", img.health, err, out)
	}
	worker := exec.Command(os.Args[0], replaceAll(comp.Services["worker"].Command, "nats://serve:4222", c.nats)...)
	worker.Env = append(env, "WO_TEST_AS_MAIN=1")
	c.startCmd(worker)
	waitWorkers(t, c, 2+2)
}

type dockerfile struct {
	env                     map[string]string
	cmd, health, entrypoint []string
}

// readDockerfile reads the final stage's ENV, ENTRYPOINT, CMD and HEALTHCHECK.
func readDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	d := dockerfile{env: map[string]string{}}
	for _, line := range strings.Split(readFile(t, path), "\n") {
		key, rest, _ := strings.Cut(line, " ")
		switch key {
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				d.env[k] = v
			}
		case "ENTRYPOINT":
			d.entrypoint = jsonArgs(t, rest)
		case "CMD":
			d.cmd = jsonArgs(t, rest)
		case "HEALTHCHECK":
			_, args, _ := strings.Cut(rest, "CMD ")
			d.health = jsonArgs(t, args)
		}
	}
	if !slices.Equal(d.entrypoint, []string{"webordinary"}) || len(d.cmd) == 0 || len(d.health) < 2 || d.health[0] != "webordinary" {
		t.Fatalf("Dockerfile: entrypoint %q, cmd %q, healthcheck %q", d.entrypoint, d.cmd, d.health)
	}
	return d
}

func jsonArgs(t *testing.T, s string) []string {
	t.Helper()
	var args []string
	if err := json.Unmarshal([]byte(s), &args); err != nil {
		t.Fatalf("Dockerfile: %q is not an exec-form JSON array: %v", s, err)
	}
	return args
}

// processEnv is the image's environment (plus extra) for a process here: WO_* from the
// image only, the data directory data, and every listener on a free port.
func (d dockerfile) processEnv(data string, extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WO_") {
			env = append(env, kv)
		}
	}
	vars := map[string]string{}
	for k, v := range d.env {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	for k, v := range vars {
		if k == "WO_DATA" {
			v = data
		} else if i := strings.LastIndex(v, ":"); i > 0 && strings.Contains(v, ".") {
			v = v[:i] + ":0"
		}
		env = append(env, k+"="+v)
	}
	return env
}

func replaceAll(args []string, old, new string) []string {
	out := slices.Clone(args)
	for i := range out {
		out[i] = strings.ReplaceAll(out[i], old, new)
	}
	return out
}

type compose struct {
	Services map[string]struct {
		Image, Build string
		Command      []string
		Environment  map[string]string
		Volumes      []string
		DependsOn    map[string]any `yaml:"depends_on"`
	}
	Volumes map[string]any
}

// readCompose parses compose.yaml and checks that its names agree: serve and worker on one
// image and one data volume at the image's data directory, the worker's NATS URL naming the
// serve service at its listen port.
func readCompose(t *testing.T, path string) compose {
	t.Helper()
	var c compose
	if err := yaml.Unmarshal([]byte(readFile(t, path)), &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	serve, worker := c.Services["serve"], c.Services["worker"]
	_, port, _ := strings.Cut(serve.Environment["WO_NATS_LISTEN"], ":")
	switch {
	case serve.Command[0] != "serve" || worker.Command[0] != "worker":
		t.Fatalf("compose.yaml commands: %q, %q", serve.Command, worker.Command)
	case serve.Image == "" || worker.Image != serve.Image:
		t.Fatalf("compose.yaml: serve builds %q, the worker runs %q", serve.Image, worker.Image)
	case !slices.Contains(worker.Command, "nats://serve:"+port) || port == "":
		t.Fatalf("compose.yaml: the worker's %q does not reach serve's NATS listener (port %q)", worker.Command, port)
	case worker.DependsOn["serve"] == nil:
		t.Fatal("compose.yaml: the worker does not wait for serve")
	}
	for _, s := range []string{"serve", "worker"} {
		vol := c.Services[s].Volumes
		name, _, _ := strings.Cut(vol[0], ":")
		if _, declared := c.Volumes[name]; len(vol) != 1 || !strings.HasSuffix(vol[0], ":/data") || !declared {
			t.Fatalf("compose.yaml: %s's volumes %q: want the shared data volume at /data", s, vol)
		}
	}
	return c
}

// waitWorkers waits until the status lists n workers.
func waitWorkers(t *testing.T, c *cluster, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := c.client().Status(t.Context())
		if err == nil && len(st.Workers) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d workers, status: %+v %v\n%s", n, st.Workers, err, readFile(t, filepath.Join(c.dir, "procs.log")))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// agentCLIs are the npm packages of the agent CLIs the image carries.
var agentCLIs = []string{"@anthropic-ai/claude-code", "@openai/codex", "opencode-ai"}

// TestDockerfileHasPicturesAndPinnedAgents: the image's final stage installs Chromium (the
// pictures in replies; without it every job's reply goes without them) and every agent CLI
// at an exact version, so an image built tomorrow runs the CLIs its tests ran.
func TestDockerfileHasPicturesAndPinnedAgents(t *testing.T) {
	t.Parallel()
	runs := finalStageRuns(readFile(t, "../../Dockerfile"))
	if !slices.ContainsFunc(runs, func(r string) bool {
		return strings.Contains(r, "apt-get install") && slices.Contains(strings.Fields(r), "chromium")
	}) {
		t.Errorf("the image's final stage does not apt-get install chromium; RUN lines:\n%s", strings.Join(runs, "\n"))
	}
	pins := npmGlobalPins(runs)
	for _, pkg := range agentCLIs {
		v, ok := pins[pkg]
		if !ok || !exactVersion(v) {
			t.Errorf("the image does not npm install -g %s at an exact version (found %q); pin it: %s@X.Y.Z", pkg, v, pkg)
		}
	}
}

// finalStageRuns is the RUN commands of the Dockerfile's last stage, continuation lines
// joined and ARG defaults substituted.
func finalStageRuns(dockerfile string) []string {
	joined := strings.ReplaceAll(dockerfile, "\\\n", " ")
	var runs []string
	args := map[string]string{}
	for line := range strings.Lines(joined) {
		key, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch key {
		case "FROM":
			runs, args = nil, map[string]string{}
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			args[k] = strings.Trim(v, `"`)
		case "RUN":
			for k, v := range args {
				rest = strings.ReplaceAll(strings.ReplaceAll(rest, "${"+k+"}", v), "$"+k, v)
			}
			runs = append(runs, rest)
		}
	}
	return runs
}

// npmGlobalPins maps each package an `npm install -g` in runs names to its version ("" when
// it names none).
func npmGlobalPins(runs []string) map[string]string {
	pins := map[string]string{}
	for _, r := range runs {
		for cmd := range strings.SplitSeq(r, "&&") {
			f := strings.Fields(cmd)
			if len(f) < 3 || f[0] != "npm" || f[1] != "install" || !slices.Contains(f, "-g") {
				continue
			}
			for _, a := range f[2:] {
				if strings.HasPrefix(a, "-") {
					continue
				}
				at := strings.LastIndex(a, "@")
				if at <= 0 {
					pins[a] = ""
					continue
				}
				pins[a[:at]] = a[at+1:]
			}
		}
	}
	return pins
}

// exactVersion reports whether v is X.Y.Z (no range, no tag).
func exactVersion(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}
