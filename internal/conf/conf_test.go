package conf

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// settings is a small configuration of two sections, as a package would register it.
type settings struct {
	data    string
	workers int
	lease   time.Duration
	noSync  bool
	max     int64
	allow   []string
}

func setup(t *testing.T) (*settings, *Set, *flag.FlagSet, *Command) {
	t.Helper()
	var c settings
	s := NewSet()
	top := s.Section("")
	top.String(&c.data, "data", "/var/lib/x", "data directory").Flag("data")
	w := s.Section("worker")
	w.Int(&c.workers, "count", 4, "workers").Flag("workers")
	w.Duration(&c.lease, "lease_ttl", 15*time.Second, "lease time to live").Was("lease-ttl")
	w.List(&c.allow, "egress_allow", []string{"a.example"}, "hosts").Was("egress-allow")
	w.Int64(&c.max, "cache_max_bytes", 1<<30, "cache bound")
	e := s.Section("engine")
	e.Bool(&c.noSync, "no_sync", false, "no fsync").Was("no-sync")
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	return &c, s, fs, s.Bind(fs)
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsWithNoSource(t *testing.T) {
	t.Parallel()
	c, _, fs, cmd := setup(t)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Apply(env(nil)); err != nil {
		t.Fatal(err)
	}
	if c.data != "/var/lib/x" || c.workers != 4 || c.lease != 15*time.Second || !slices.Equal(c.allow, []string{"a.example"}) || c.max != 1<<30 {
		t.Fatalf("defaults: %+v", *c)
	}
}

// TestPrecedence: the file < the environment < --set < flags, key by key; a list set by a
// later source replaces the earlier one's items, and a source's own items add up.
func TestPrecedence(t *testing.T) {
	t.Parallel()
	c, s, fs, cmd := setup(t)
	file := writeFile(t, "data = \"/file\"\n[worker]\ncount = 2\nlease_ttl = \"20s\"\negress_allow = [\"f1\", \"f2\"]\ncache_max_bytes = 5\n[engine]\nno_sync = true\n")
	err := fs.Parse([]string{"--config", file, "--set", "worker.lease_ttl=40s", "--set", "worker.count=7", "--set", "worker.egress_allow=s1",
		"--set", "worker.egress_allow=s2", "--workers", "9"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Apply(env(map[string]string{"WO_LEASE_TTL": "30s", "WO_DATA": "/env", "WO_WORKER_CACHE_MAX_BYTES": "6"})); err != nil {
		t.Fatal(err)
	}
	want := settings{data: "/env", workers: 9, lease: 40 * time.Second, noSync: true, max: 6, allow: []string{"s1", "s2"}}
	if c.data != want.data || c.workers != want.workers || c.lease != want.lease || c.noSync != want.noSync || c.max != want.max || !slices.Equal(c.allow, want.allow) {
		t.Fatalf("got %+v, want %+v", *c, want)
	}
	if !s.Changed("worker.count") || s.Changed("nope") {
		t.Fatal("Changed is wrong")
	}
}

func TestFileErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, want string }{
		{"unknown key", "[worker]\nlease_tt = \"1s\"\n", `unknown key "worker.lease_tt": ` + "`webordinary config keys` lists every key"},
		{"near miss", "[worker]\nworkers = 3\n", `unknown key "worker.workers" (did you mean worker.count?)`},
		{"unknown section", "[frob]\nx = 1\n", `unknown key "frob.x"`},
		{"a section as a key", "worker = 3\n", "worker is a section: write [worker] and its keys below it"},
		{"duration without unit", "[worker]\nlease_ttl = 30\n", "worker.lease_ttl = 30: want a duration such as 90s"},
		{"list for a scalar", "[worker]\ncount = [1]\n", "worker.count: want one integer, not a list"},
		{"scalar for a list", "[worker]\negress_allow = \"x\"\n", `worker.egress_allow: want a list, e.g. egress_allow = ["a", "b"]`},
		{"not TOML", "[worker\n", "line 1 column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, fs, cmd := setup(t)
			p := writeFile(t, tc.file)
			if err := fs.Parse([]string{"--config", p}); err != nil {
				t.Fatal(err)
			}
			err := cmd.Apply(env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Apply = %v, want it to name %s and say %q", err, p, tc.want)
			}
		})
	}
}

func TestSetAndEnvErrors(t *testing.T) {
	t.Parallel()
	_, _, fs, cmd := setup(t)
	if err := fs.Parse([]string{"--set", "worker.nope=1"}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Apply(env(nil)); err == nil || !strings.Contains(err.Error(), `--set: unknown key "worker.nope"`) {
		t.Fatalf("Apply = %v", err)
	}
	_, _, fs, cmd = setup(t)
	_ = fs.Parse(nil)
	if err := cmd.Apply(env(map[string]string{"WO_LEASE_TTL": "soon"})); err == nil || !strings.Contains(err.Error(), `WO_LEASE_TTL="soon" (key worker.lease_ttl)`) {
		t.Fatalf("Apply = %v", err)
	}
	_, _, fs, _ = setup(t)
	if err := fs.Parse([]string{"--workers", "many"}); err == nil {
		t.Fatal("--workers many parsed")
	}
}

// TestRemovedFlagNamesItsKey: a flag that became a key is refused with the key, the --set
// that does the same and the variable that still works.
func TestRemovedFlagNamesItsKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", "/d", "--lease-ttl", "5s"}, "--lease-ttl is no longer a flag: set lease_ttl under [worker] of the config file (--config FILE), or give --set worker.lease_ttl=5s; WO_LEASE_TTL still works"},
		{[]string{"-lease-ttl=5s"}, "--set worker.lease_ttl=5s"},
		{[]string{"--no-sync"}, "--set engine.no_sync=true; WO_NO_SYNC still works"},
	} {
		_, _, _, cmd := setup(t)
		if err := cmd.CheckArgs(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckArgs(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
	_, _, _, cmd := setup(t)
	if err := cmd.CheckArgs([]string{"--data", "/d", "--", "--lease-ttl"}); err != nil {
		t.Fatal(err)
	}
}

// TestExampleIsTheDefaults: the example file, uncommented, is valid and sets every key to
// its default.
func TestExampleIsTheDefaults(t *testing.T) {
	t.Parallel()
	_, s, _, _ := setup(t)
	var b bytes.Buffer
	if err := s.WriteExample(&b, map[string]string{"worker": "The workers."}); err != nil {
		t.Fatal(err)
	}
	uncommented := regexp.MustCompile(`(?m)^(# \(WO_.*\)\n)# `).ReplaceAllString(b.String(), "$1")
	c2, s2, _, _ := setup(t)
	*c2 = settings{}
	if err := s2.LoadTOML([]byte(uncommented)); err != nil {
		t.Fatalf("%v\n%s", err, uncommented)
	}
	for _, k := range s2.Keys() {
		if !k.changed {
			t.Errorf("the example does not set %s", k.Name)
		}
	}
	if c2.data != "/var/lib/x" || c2.workers != 4 || c2.lease != 15*time.Second || !slices.Equal(c2.allow, []string{"a.example"}) {
		t.Fatalf("example read back: %+v\n%s", *c2, uncommented)
	}
}

func TestReferenceListsEveryKey(t *testing.T) {
	t.Parallel()
	_, s, _, _ := setup(t)
	var b bytes.Buffer
	if err := s.WriteReference(&b, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#### [worker]", "| `lease_ttl` | `\"15s\"` | `WO_LEASE_TTL` (was `--lease-ttl`) | lease time to live |",
		"| `count` | `4` | `WO_WORKERS`, `--workers` | workers |", "| `cache_max_bytes` | `1073741824` | `WO_WORKER_CACHE_MAX_BYTES` |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("reference lacks %q:\n%s", want, b.String())
		}
	}
}
