package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOwnLeavesSharedFilesToRoot: a file root shares read-only with other trees (a hard link
// of the platform's prepared node_modules) stays root's after Own, and the job, in its jail,
// can neither write, truncate, chmod nor touch it, while it can still remove its own link;
// a file root wrote once (a checkout) is given to the job as before.
func TestOwnLeavesSharedFilesToRoot(t *testing.T) {
	t.Parallel()
	s := required(t)
	if !s.OtherUser() {
		t.Skip("jobs run as the platform's user: nothing is beyond their reach (run as root)")
	}
	tn := newTenant(t, s)
	store := filepath.Join(tn.root, "store")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(store, "index.js")
	if err := os.WriteFile(orig, []byte("module.exports = 1\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(tn.ws, "node_modules")
	if err := os.Mkdir(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(orig, filepath.Join(mod, "index.js")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tn.ws, "page.html"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Own(tn.ws); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(orig, &st); err != nil || st.Uid != 0 {
		t.Fatalf("Own gave the shared file away: uid %d (%v)", st.Uid, err)
	}
	if err := syscall.Stat(filepath.Join(tn.ws, "page.html"), &st); err != nil || st.Uid == 0 {
		t.Fatalf("Own left the checkout's file to root: %v", err)
	}
	out, _ := runIn(t, s.Jail(tn.spec()), tn.ws, `f=node_modules/index.js
echo evil >> $f && echo WROTE; truncate -s 0 $f && echo TRUNCATED; chmod 666 $f && echo CHMOD
chown $(id -u) $f && echo CHOWN; touch -d 2000-01-01 $f && echo TOUCHED
echo evil > page.html && echo PAGE; rm $f && echo REMOVED`)
	for _, done := range []string{"WROTE", "TRUNCATED", "CHMOD", "CHOWN", "TOUCHED"} {
		if strings.Contains(out, done) {
			t.Errorf("the job %s the shared file:\n%s", strings.ToLower(done), out)
		}
	}
	if !strings.Contains(out, "PAGE") || !strings.Contains(out, "REMOVED") {
		t.Errorf("the job could not write its own file or remove its link:\n%s", out)
	}
	if data, _ := os.ReadFile(orig); string(data) != "module.exports = 1\n" {
		t.Fatalf("the shared file changed: %q", data)
	}
}
