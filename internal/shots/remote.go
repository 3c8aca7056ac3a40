package shots

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// BlobStore is the engine's blob store of jobs' pictures, for workers and serves that share
// no disk (previews in the engine or in S3): one tar of Dir/<job>/ per job, keyed by job id.
const BlobStore = "shots"

// versionName records, in a fetched copy, the version it came from; publishedName, in a
// directory this machine wrote, the version it published.
const (
	versionName   = ".version"
	publishedName = ".published"
)

// remoteDirName holds fetched copies, Dir/.remote/<job>/: apart from the directories this
// machine writes, so a fetch never touches a job being shot here (a serve with workers of its
// own shares its Dir with them).
const remoteDirName = ".remote"

// remoteTimeout bounds one copy to or from Store.Remote; versionTimeout the cheap check.
const (
	remoteTimeout  = 30 * time.Second
	versionTimeout = 5 * time.Second
)

// publish copies a job's directory to s.Remote, if set: the report and every picture it
// names. The version published is noted beside them.
func (s Store) publish(ctx context.Context, jobID string) error {
	if s.Remote == nil {
		return nil
	}
	if !broker.BlobKey.MatchString(jobID) {
		return fmt.Errorf("shots: job id %q cannot be a blob key", jobID)
	}
	dir := s.jobDir(jobID)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if !e.Type().IsRegular() || !validName.MatchString(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	version, err := s.Remote.Put(ctx, jobID, buf.Bytes())
	if err != nil {
		return fmt.Errorf("shots: store the pictures of %s in the engine: %w", jobID, err)
	}
	return os.WriteFile(filepath.Join(dir, publishedName), []byte(version), 0o644)
}

// dirOf is the directory to read a job's pictures from: this machine's own, unless another
// machine published a later version (then a fetched copy); a fetched copy when this machine
// has no finished pictures of the job (none, or being taken again).
func (s Store) dirOf(jobID string) (string, error) {
	local := s.jobDir(jobID)
	_, lerr := os.Stat(filepath.Join(local, reportName))
	if s.Remote == nil || !broker.BlobKey.MatchString(jobID) {
		return local, nil
	}
	published, perr := os.ReadFile(filepath.Join(local, publishedName))
	if lerr == nil && perr != nil {
		return local, nil // taken here and not published: nobody else has them
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	v, err := s.Remote.Version(ctx, jobID)
	cancel()
	switch {
	case errors.Is(err, broker.ErrNotFound) || (err != nil && lerr == nil):
		return local, nil // nothing to fetch, or the engine cannot say: ours will do
	case err != nil:
		return "", fmt.Errorf("shots: pictures of %s: %w", jobID, err)
	case lerr == nil && v == string(published):
		return local, nil
	}
	return s.fetched(jobID, v)
}

// fetched returns the fetched copy of version v, fetching it when the copy is of another.
func (s Store) fetched(jobID, v string) (string, error) {
	dir := filepath.Join(s.Dir, remoteDirName, unsafeChars.ReplaceAllString(jobID, "_"))
	if have, err := os.ReadFile(filepath.Join(dir, versionName)); err == nil && string(have) == v {
		return dir, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	data, version, err := s.Remote.Get(ctx, jobID)
	if errors.Is(err, broker.ErrNotFound) {
		return dir, nil // gone meanwhile: Report says ErrNoPictures
	}
	if err != nil {
		return "", fmt.Errorf("shots: fetch the pictures of %s: %w", jobID, err)
	}
	return dir, unpack(dir, jobID, data, version)
}

// unpack writes a fetched tar as dir, replacing it in one rename. Only the names Shoot writes
// are accepted: the archive came over the network.
func unpack(dir, jobID string, data []byte, version string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("shots: pictures of %s: %w", jobID, err)
		}
		if h.Typeflag != tar.TypeReg || !validName.MatchString(h.Name) {
			return fmt.Errorf("shots: pictures of %s: unexpected entry %q", jobID, h.Name)
		}
		body, err := io.ReadAll(io.LimitReader(tr, broker.MaxBlobSize))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, h.Name), body, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, versionName), []byte(version), 0o644); err != nil {
		return err
	}
	old := tmp + "-old"
	if err := os.Rename(dir, old); err == nil {
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}
