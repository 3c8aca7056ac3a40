package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Own makes the job's identity the owner of everything under dir (the platform writes
// checkouts and attachments as root; the job must be able to edit them). It changes only
// entries owned by someone else and never follows symlinks; files root shares read-only
// with other trees stay root's (see shared). A no-op unless jobs switch uid.
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
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) == uid && int(st.Gid) == gid || shared(fi, st)) {
			return nil
		}
		if err := os.Lchown(p, uid, gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sandbox: give %s to the job user: %w", p, err)
		}
		return nil
	})
}

// shared reports whether fi is a file root shares read-only with other trees (a hard link
// into the platform's prepared node_modules, see build.Packages): a regular file root owns,
// linked more than once, with no write permission. It stays root's, so that no job can
// write through it to what other tenants get. (Leaving a file to root only ever takes from
// the job; and a job may not link a file it neither owns nor can write.)
func shared(fi fs.FileInfo, st *syscall.Stat_t) bool {
	return fi.Mode().IsRegular() && st.Uid == 0 && st.Nlink > 1 && fi.Mode().Perm()&0o222 == 0
}

// OtherUser reports whether jobs run as a user other than root while the platform is root,
// so that a file root owns read-only is beyond a job's reach: it can neither write, chmod
// nor chown it.
func (s *Sandbox) OtherUser() bool {
	c := s.credential()
	return c != nil && c.Uid != 0
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
	return Reachable(p, uid, gid)
}

// Reachable checks that uid:gid has search permission on every ancestor of p (bwrap binds p
// as that user). Root reaches everything.
func Reachable(p string, uid, gid int) error {
	abs, err := filepath.Abs(p)
	if err != nil {
		return err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if !searchable(dir, uid, gid) {
			return fmt.Errorf("the job user (uid %d) cannot enter %s, so it cannot reach %s: "+
				"put the data directory elsewhere (e.g. /var/lib/webordinary), give it search permission (chmod o+x %s), or set sandbox.uid",
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

// visibleCopy copies the regular file p into the programs directory (below the first root,
// which the job's user can reach) once per path, size and modification time, and returns the
// copy's path.
func (s *Sandbox) visibleCopy(p string) (string, error) {
	if len(s.cfg.Roots) == 0 {
		return "", errors.New("no root to copy programs into")
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("sandbox: %s is not a regular file", p)
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d\x00%d", p, fi.Size(), fi.ModTime().UnixNano())))
	dir := filepath.Join(s.cfg.Roots[0], ".programs")
	dst := filepath.Join(dir, hex.EncodeToString(sum[:12]))
	s.copyMu.Lock()
	defer s.copyMu.Unlock()
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := copyFile(p, dst); err != nil {
		return "", fmt.Errorf("sandbox: copy %s for jobs: %w", p, err)
	}
	return dst, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".copy-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
