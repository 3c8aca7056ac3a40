package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Own makes the job's identity the owner of everything under dir (the platform writes
// checkouts and attachments as root; the job must be able to edit them). It changes only
// entries owned by someone else and never follows symlinks. A no-op unless jobs switch uid.
func (s *Sandbox) Own(dir string) error {
	cred := s.credential()
	if cred == nil {
		return nil
	}
	uid, gid := int(cred.Uid), int(cred.Gid)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		if err := os.Lchown(p, uid, gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sandbox: give %s to the job user: %w", p, err)
		}
		return nil
	})
}

// MkdirOwned creates dir (and parents) and gives dir itself to the job's identity.
func (s *Sandbox) MkdirOwned(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if cred := s.credential(); cred != nil {
		return os.Lchown(dir, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

// CheckReachable says, for each path, whether the job's identity can reach it (search
// permission on every ancestor). bwrap sets up bind mounts as the job's user, so a workspace
// under a directory it cannot enter (such as /root, mode 0700) cannot be bound.
func (s *Sandbox) CheckReachable(paths ...string) error {
	if !s.Active() {
		return nil
	}
	for _, p := range paths {
		if err := s.reachable(p); err != nil {
			return err
		}
	}
	return nil
}

// reachable checks search permission for the job's identity on every ancestor of p.
func (s *Sandbox) reachable(p string) error {
	uid, gid := os.Getuid(), os.Getgid()
	if c := s.credential(); c != nil {
		uid, gid = int(c.Uid), int(c.Gid)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if !searchable(dir, uid, gid) {
			return fmt.Errorf("the job user (uid %d) cannot enter %s, so it cannot reach %s: "+
				"put the data directory elsewhere (e.g. /var/lib/webordinary), give it search permission (chmod o+x %s), or set --sandbox-uid",
				uid, dir, abs, dir)
		}
		if dir == "/" {
			return nil
		}
	}
}

func searchable(dir string, uid, gid int) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return true // missing: created later by the platform, checked again by bwrap
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || uid == 0 {
		return true
	}
	m := fi.Mode().Perm()
	switch {
	case int(st.Uid) == uid:
		return m&0o100 != 0
	case int(st.Gid) == gid:
		return m&0o010 != 0
	}
	return m&0o001 != 0
}
