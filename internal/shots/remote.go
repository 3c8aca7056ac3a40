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

// versionName records, in a directory fetched from Store.Remote, the version it came from.
const versionName = ".version"

// remoteTimeout bounds one copy to or from Store.Remote.
const remoteTimeout = 30 * time.Second

// publish copies a job's directory to s.Remote, if set: the report and every picture it names.
func (s Store) publish(ctx context.Context, jobID string) error {
	if s.Remote == nil {
		return nil
	}
	if !broker.BlobKey.MatchString(jobID) {
		return fmt.Errorf("shots: job id %q cannot be a blob key", jobID)
	}
	entries, err := os.ReadDir(s.jobDir(jobID))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if !e.Type().IsRegular() || !validName.MatchString(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.jobDir(jobID), e.Name()))
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
	if _, err := s.Remote.Put(ctx, jobID, buf.Bytes()); err != nil {
		return fmt.Errorf("shots: store the pictures of %s in the engine: %w", jobID, err)
	}
	return nil
}

// ensure makes a job's pictures local: kept as they are when this machine took them, else
// fetched from s.Remote (again when the remote copy changed, as after a check turn's fix).
// ErrNoPictures when neither has them.
func (s Store) ensure(jobID string) error {
	dir := s.jobDir(jobID)
	local, lerr := os.ReadFile(filepath.Join(dir, versionName))
	_, rerr := os.Stat(filepath.Join(dir, reportName))
	switch {
	case s.Remote == nil || !broker.BlobKey.MatchString(jobID):
		return nil // the local directory is all there is
	case rerr == nil && lerr != nil:
		return nil // taken here
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	if rerr == nil {
		if v, err := s.Remote.Version(ctx, jobID); err != nil || v == string(local) {
			return nil // current, or the engine cannot say: what is here will do
		}
	}
	data, version, err := s.Remote.Get(ctx, jobID)
	if errors.Is(err, broker.ErrNotFound) {
		return nil // Report and Read say ErrNoPictures
	}
	if err != nil {
		return fmt.Errorf("shots: fetch the pictures of %s: %w", jobID, err)
	}
	return s.unpack(jobID, data, version)
}

// unpack writes a fetched tar as the job's directory, replacing it in one rename. Only the
// names Shoot writes are accepted: the archive came over the network.
func (s Store) unpack(jobID string, data []byte, version string) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(s.Dir, ".fetch-")
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
	dir := s.jobDir(jobID)
	old := tmp + "-old"
	if err := os.Rename(dir, old); err == nil {
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}
