package build

import (
	"context"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// TestSealModulesLeavesNothingAJobCouldUse: what a prepared install left (a set-id
// executable, a FIFO, a world-writable directory, a symlink) becomes root's and read-only,
// without set-id bits, or goes.
func TestSealModulesLeavesNothingAJobCouldUse(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "node_modules")
	if err := os.MkdirAll(filepath.Join(dir, "pkg"), 0o777); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "pkg", "run"), "#!/bin/sh\n")
	write(t, filepath.Join(dir, "pkg", "index.js"), "1\n")
	if err := os.Chmod(filepath.Join(dir, "pkg", "run"), 0o6777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "pkg"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pkg", "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pkg/run", filepath.Join(dir, "run")); err != nil {
		t.Fatal(err)
	}
	if err := sealModules(dir); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{"pkg": fs.ModeDir | 0o755, "pkg/run": 0o555, "pkg/index.js": 0o444, "run": fs.ModeSymlink | 0o777}
	for name, mode := range want {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v (%v), want %v", name, fi.Mode(), err, mode)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && st.Uid != 0 {
			t.Errorf("%s is uid %d's, not root's", name, st.Uid)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "pkg", "fifo")); err == nil {
		t.Error("the FIFO was kept")
	}
}

// TestShareableOnlyWhenTheInputsDetermineTheInstall: a site whose install reads more than
// package.json, its lockfile and .npmrc installs in its own workspace.
func TestShareableOnlyWhenTheInputsDetermineTheInstall(t *testing.T) {
	t.Parallel()
	const pkg = `{"name":"s","version":"1.0.0","dependencies":{"is-number":"7.0.0"}}`
	const lock = `{"lockfileVersion":3,"packages":{"":{"name":"s"},"node_modules/is-number":{"version":"7.0.0","resolved":"https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz","integrity":"sha512-x"}}}`
	cases := []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"registry packages", map[string]string{"package.json": pkg, "package-lock.json": lock}, true},
		{"with .npmrc", map[string]string{"package.json": pkg, "package-lock.json": lock, ".npmrc": "fund=false\n"}, true},
		{"no lockfile", map[string]string{"package.json": pkg}, false},
		{"two lockfiles", map[string]string{"package.json": pkg, "package-lock.json": lock, "npm-shrinkwrap.json": lock}, false},
		{"postinstall of its own", map[string]string{"package.json": `{"scripts":{"postinstall":"node fix.js"}}`, "package-lock.json": lock}, false},
		{"prepare of its own", map[string]string{"package.json": `{"scripts":{"prepare":"husky"}}`, "package-lock.json": lock}, false},
		{"workspaces", map[string]string{"package.json": `{"workspaces":["a"]}`, "package-lock.json": lock}, false},
		{"file: package", map[string]string{"package.json": pkg, "package-lock.json": `{"packages":{"node_modules/x":{"resolved":"file:../x"}}}`}, false},
		{"linked package", map[string]string{"package.json": pkg, "package-lock.json": `{"packages":{"node_modules/x":{"resolved":"x","link":true},"x":{}}}`}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, data := range c.files {
				write(t, filepath.Join(dir, name), data)
			}
			if _, ok := readInputs(context.Background(), dir); ok != c.want {
				t.Fatalf("shareable %v, want %v", ok, c.want)
			}
		})
	}
}

// TestModulesKeyNamesEveryInput: each input and each variable of the tenant's changes the
// key; the platform's own variables and the home do not.
func TestModulesKeyNamesEveryInput(t *testing.T) {
	t.Parallel()
	p := &Packages{Dir: t.TempDir()}
	base := installInputs{names: []string{"package.json", "package-lock.json"},
		data: map[string][]byte{"package.json": []byte("{}"), "package-lock.json": []byte("{}")}}
	cfg := Config{Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=/a", "HTTP_PROXY=http://127.0.0.1:1", "X=1"},
		FillEnv: []string{"PATH=" + os.Getenv("PATH"), "HTTP_PROXY=http://127.0.0.1:1"}}
	key := p.modulesKey(base, cfg)
	same := cfg
	same.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/b", "HTTP_PROXY=http://127.0.0.1:2", "X=1"}
	same.FillEnv = []string{"PATH=" + os.Getenv("PATH"), "HTTP_PROXY=http://127.0.0.1:2"}
	if got := p.modulesKey(base, same); got != key {
		t.Error("another home or egress port changed the key")
	}
	other := cfg
	other.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/a", "HTTP_PROXY=http://127.0.0.1:1", "X=2"}
	if p.modulesKey(base, other) == key {
		t.Error("a tenant's variable did not change the key")
	}
	for _, name := range []string{"package.json", "package-lock.json", ".npmrc"} {
		in := installInputs{names: append([]string(nil), base.names...), data: map[string][]byte{}}
		for k, v := range base.data {
			in.data[k] = v
		}
		if _, ok := in.data[name]; !ok {
			in.names = append(in.names, name)
		}
		in.data[name] = []byte(`{"x":1}`)
		if p.modulesKey(in, cfg) == key {
			t.Errorf("%s did not change the key", name)
		}
	}
}

// fakeNPM puts an npm that runs script (sh) first on a PATH and returns the environment.
func fakeNPM(t *testing.T, script string) []string {
	t.Helper()
	bin := t.TempDir()
	write(t, filepath.Join(bin, "npm"), "#!/bin/sh\n[ \"$1\" = --version ] && { echo 0.0.0-fake; exit 0; }\n"+script)
	if err := os.Chmod(filepath.Join(bin, "npm"), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
}

// shopFiles is a site whose install the store can prepare.
func shopFiles(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "package.json"), `{"name":"s","version":"1.0.0","dependencies":{"is-number":"7.0.0"}}`)
	write(t, filepath.Join(dir, "package-lock.json"), `{"lockfileVersion":3,"packages":{"":{"name":"s"},"node_modules/is-number":{"version":"7.0.0"}}}`)
	return dir
}

// TestPreparedInstallCannotLeadTheCopyOut: the install the platform prepares is the attacker:
// it makes node_modules a link to a directory of the platform's. Nothing of that directory
// reaches the store or the site, which installs on its own instead.
func TestPreparedInstallCannotLeadTheCopyOut(t *testing.T) {
	t.Parallel()
	secret := t.TempDir()
	write(t, filepath.Join(secret, "key"), "31337")
	env := fakeNPM(t, "ln -s "+secret+" node_modules\n")
	p := &Packages{Dir: t.TempDir()}
	dir := shopFiles(t)
	log := newTail(4 << 10)
	if p.modules(context.Background(), dir, "x", Config{Env: env}, log) {
		t.Fatalf("the store took an install whose node_modules is a link:\n%s", log)
	}
	if _, err := os.Lstat(filepath.Join(dir, "node_modules")); err == nil {
		t.Fatal("the site got a node_modules")
	}
	filepath.WalkDir(p.Dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "key" {
			t.Errorf("the platform's file reached the store: %s", path)
		}
		return nil
	})
}

// TestPreparedInstallIsShared: a second site with the same inputs gets the prepared tree
// without running npm; another lockfile prepares its own.
func TestPreparedInstallIsShared(t *testing.T) {
	t.Parallel()
	count := filepath.Join(t.TempDir(), "runs")
	env := fakeNPM(t, "echo run >> "+count+"\nmkdir -p node_modules/is-number && echo 'module.exports=1' > node_modules/is-number/index.js\n")
	p := &Packages{Dir: t.TempDir()}
	for i := range 2 {
		dir := shopFiles(t)
		if !p.modules(context.Background(), dir, "x", Config{Env: env}, newTail(4<<10)) {
			t.Fatalf("site %d was not installed from the store", i+1)
		}
		if data, err := os.ReadFile(filepath.Join(dir, "node_modules", "is-number", "index.js")); err != nil || string(data) != "module.exports=1\n" {
			t.Fatalf("site %d: index.js %q %v", i+1, data, err)
		}
	}
	if runs, _ := os.ReadFile(count); string(runs) != "run\n" {
		t.Fatalf("npm ran %q for two sites with the same inputs", runs)
	}
	dir := shopFiles(t)
	write(t, filepath.Join(dir, "package-lock.json"), `{"lockfileVersion":3,"packages":{"":{"name":"s"},"node_modules/is-number":{"version":"7.0.1"}}}`)
	if !p.modules(context.Background(), dir, "x", Config{Env: env}, newTail(4<<10)) {
		t.Fatal("the third site was not installed")
	}
	if runs, _ := os.ReadFile(count); string(runs) != "run\nrun\n" {
		t.Fatalf("npm ran %q: another lockfile shared the first one's tree", runs)
	}
}

// TestFailedPreparationIsNotRepeated: inputs whose install fails (an out-of-date lockfile) are
// installed in the site on the next job without preparing them again.
func TestFailedPreparationIsNotRepeated(t *testing.T) {
	t.Parallel()
	count := filepath.Join(t.TempDir(), "runs")
	env := fakeNPM(t, "echo run >> "+count+"\nexit 1\n")
	p := &Packages{Dir: t.TempDir()}
	for i := range 2 {
		if p.modules(context.Background(), shopFiles(t), "x", Config{Env: env}, newTail(4<<10)) {
			t.Fatalf("site %d was installed from a failed preparation", i+1)
		}
	}
	if runs, _ := os.ReadFile(count); string(runs) != "run\n" {
		t.Fatalf("npm ran %q: the failed preparation was repeated", runs)
	}
}

// TestToolchainIsAskedWithoutTheJobsHome: the job is the attacker. Its build home (which the
// install's environment names as HOME) holds an .npmrc it planted, here a FIFO. The platform
// asks the toolchain's versions as root outside any jail: npm must not read the job's
// settings there (a FIFO would hold every install of the worker until the query's timeout).
func TestToolchainIsAskedWithoutTheJobsHome(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Node)
	home := t.TempDir()
	fifo := filepath.Join(home, ".npmrc")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	opened := make(chan bool, 1)
	go func() { // a reader opening the FIFO (npm reading the job's settings) lets this through
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		opened <- err == nil
		if err == nil {
			f.WriteString("fund=false\n")
			f.Close()
		}
	}()
	p := &Packages{Dir: t.TempDir()}
	in := installInputs{names: []string{"package.json"}, data: map[string][]byte{"package.json": []byte("{}")}}
	path := "PATH=" + os.Getenv("PATH")
	p.modulesKey(in, Config{Env: []string{path, "HOME=" + home}, FillEnv: []string{path}})
	select {
	case <-opened:
		t.Error("asking the toolchain's versions read the job's .npmrc")
	default:
	}
	if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil { // lets the writer go
		defer f.Close()
	}
	if !strings.Contains(p.tools, "npm") || strings.Contains(p.tools, "unknown") {
		t.Errorf("toolchain %q", p.tools)
	}
}

// TestNothingOfThePreparationOutlivesIt: the prepared install is the attacker, jailed as the
// pipeline jails it (real bubblewrap, as the job's user). It leaves a process behind, in a
// session of its own, holding a file of its node_modules open for writing and waiting for the
// seal to make the file root's, to write through it then (every site with the key would get
// what it writes). When the store has the entry, nothing of the preparation runs any more,
// and the entry holds what the install made.
func TestNothingOfThePreparationOutlivesIt(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Root)
	capability.Need(t, capability.Bubblewrap)
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	marker := "webordinary-left-behind-" + strings.ToLower(rand.Text())
	bin := filepath.Join(base, "bin")
	write(t, filepath.Join(bin, "npm"), "#!/bin/sh\n[ \"$1\" = --version ] && { echo 0.0.0-fake; exit 0; }\n"+
		"mkdir -p node_modules/is-number && echo 'module.exports=1' > node_modules/is-number/index.js\n"+
		"setsid sh -c 'exec 3>>node_modules/is-number/index.js; touch ../home/ready; while [ \"$(stat -c %u node_modules/is-number/index.js)\" != 0 ]; do sleep 0.01; done; echo evil >&3' "+
		marker+" </dev/null >/dev/null 2>&1 &\n"+
		"until [ -e ../home/ready ]; do sleep 0.01; done; echo left behind\n")
	if err := os.Chmod(filepath.Join(bin, "npm"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, Roots: []string{base}, ReadOnly: []string{bin}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Env: []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, Own: sb.Own, Link: sb.OtherUser(),
		FillJail: func(dir string) (*sandbox.Jail, error) {
			if err := sb.Own(dir); err != nil {
				return nil, err
			}
			return sb.Jail(sandbox.Spec{Writable: []string{dir}}), nil
		}}
	p := &Packages{Dir: filepath.Join(base, "packages")}
	log := newTail(4 << 10)
	if !p.modules(context.Background(), shopFiles(t), "x", cfg, log) {
		t.Fatalf("the site was not installed from the store:\n%s", log)
	}
	if !strings.Contains(log.String(), "left behind") {
		t.Fatalf("the preparation did not leave its process behind:\n%s", log)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		if data, _ := os.ReadFile(c); strings.Contains(string(data), marker) {
			t.Errorf("the preparation's process %s runs on after the store took its tree: %q", filepath.Dir(c), data)
		}
	}
	entries, _ := filepath.Glob(filepath.Join(p.modulesDir(), "[0-9a-f]*", "is-number", "index.js"))
	for _, e := range entries {
		if data, _ := os.ReadFile(e); string(data) != "module.exports=1\n" {
			t.Errorf("the store's %s holds %q", e, data)
		}
	}
	if len(entries) != 1 {
		t.Fatalf("the store holds %d entries", len(entries))
	}
}

// TestAnEntryEvictedDuringItsGraftIsNotUsed: the store evicts the entry a site is being given
// (another tenant's preparation made room) before the copy is checked. The site must not keep a
// copy that may be partial: the graft reports failure and leaves no node_modules, so the site
// installs on its own; the evicted entry is gone from the store.
func TestAnEntryEvictedDuringItsGraftIsNotUsed(t *testing.T) {
	store, site := t.TempDir(), t.TempDir()
	entry := filepath.Join(store, "k1")
	if err := os.MkdirAll(filepath.Join(entry, "astro"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(entry, "astro", "index.js"), []byte("export {}\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	duringGraft = func() {
		if err := retire(entry); err != nil {
			t.Error(err)
		}
	}
	defer func() { duringGraft = nil }()
	if n, err := graftChecked(site, entry, Config{}); err == nil {
		t.Fatalf("a graft whose entry was evicted meanwhile reported %d entries and no error", n)
	}
	if _, err := os.Lstat(filepath.Join(site, "node_modules")); !os.IsNotExist(err) {
		t.Errorf("the site kept node_modules from an evicted entry: %v", err)
	}
	left, _ := os.ReadDir(store)
	if len(left) != 0 {
		t.Errorf("the store still holds %v after the eviction", left)
	}
	duringGraft = nil
	if err := os.MkdirAll(entry, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := graftChecked(site, entry, Config{}); err != nil {
		t.Fatalf("a graft with nothing evicted: %v", err)
	}
}
