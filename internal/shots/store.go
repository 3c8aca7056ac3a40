package shots

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/outbox"
)

// ErrNoPictures means a job has no report: it deployed nothing, or ran before pictures
// existed, or its pictures were removed.
var ErrNoPictures = errors.New("no pictures for this job")

// Store reads and writes jobs' pictures: Dir/<job>/report.json and the files it names. The
// reply composer and the dashboard read it; Shoot writes it. Safe for concurrent use.
type Store struct {
	Dir string
	// Remote, when set, is where pictures travel between machines (see BlobStore): Shoot
	// copies each job's directory there, and reads fetch what this Dir lacks.
	Remote broker.Blobs
}

const reportName = "report.json"

// jobDir is the job's directory; job ids are made safe for a file name.
func (s Store) jobDir(jobID string) string {
	return filepath.Join(s.Dir, unsafeChars.ReplaceAllString(jobID, "_"))
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// validName accepts the file names Shoot writes (p1-desktop-after.png, report.json).
var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*\.(png|jpg|json)$`)

// Report reads a job's report; ErrNoPictures when it has none.
func (s Store) Report(jobID string) (Report, error) {
	dir, err := s.dirOf(jobID)
	if err != nil {
		return Report{}, err
	}
	return s.reportIn(dir, jobID)
}

// reportIn reads the report in dir.
func (s Store) reportIn(dir, jobID string) (Report, error) {
	data, err := os.ReadFile(filepath.Join(dir, reportName))
	if errors.Is(err, fs.ErrNotExist) {
		return Report{}, ErrNoPictures
	}
	if err != nil {
		return Report{}, err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return Report{}, fmt.Errorf("shots report of %s: %w", jobID, err)
	}
	return r, nil
}

// Path returns the path of a job's picture, refusing names Shoot does not write (so an
// HTTP handler can pass a URL segment through). Pictures another machine took are fetched
// first (Remote).
func (s Store) Path(jobID, name string) (string, error) {
	if _, err := s.path(jobID, name); err != nil {
		return "", err
	}
	dir, err := s.dirOf(jobID)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// path is Path without fetching: where this machine writes.
func (s Store) path(jobID, name string) (string, error) {
	if !validName.MatchString(name) || strings.Contains(name, "..") {
		return "", fmt.Errorf("%w: no picture named %q", ErrNoPictures, name)
	}
	return filepath.Join(s.jobDir(jobID), name), nil
}

// Read returns a job's picture.
func (s Store) Read(jobID, name string) ([]byte, error) {
	p, err := s.Path(jobID, name)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// reset empties a job's directory: a retried job's pictures replace the last attempt's.
func (s Store) reset(jobID string) error {
	dir := s.jobDir(jobID)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

func (s Store) write(jobID, name string, data []byte) error {
	p, err := s.path(jobID, name)
	if err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// save writes the report last, through a rename, so a reader sees it only with its files.
func (s Store) save(jobID string, r Report) error {
	if err := os.MkdirAll(s.jobDir(jobID), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.jobDir(jobID), ".report.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.jobDir(jobID), reportName))
}

// Images returns the reply's pictures of a job, in the report's order, ready for
// outbox.Reply.Images; nil when the job has none (no report, nothing changed, or the pictures
// could not be taken: the job page says why, the reply says nothing).
func (s Store) Images(jobID string) []outbox.Image {
	dir, err := s.dirOf(jobID) // once: every picture comes from the same copy
	if err != nil {
		return nil
	}
	rep, err := s.reportIn(dir, jobID)
	if err != nil {
		return nil
	}
	var out []outbox.Image
	for _, pg := range rep.Pages {
		for _, pic := range pg.Shots {
			if pic.Mail == "" || !validName.MatchString(pic.Mail) {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, pic.Mail))
			if err != nil {
				continue
			}
			out = append(out, outbox.Image{ContentID: strings.TrimSuffix(pic.Mail, filepath.Ext(pic.Mail)) + "@" +
				unsafeChars.ReplaceAllString(jobID, "-") + ".webordinary", ContentType: pic.MailType, Data: data,
				Width: pic.MailW, Height: pic.MailH, Screen: pic.Width, Alt: pic.Alt, Caption: caption(pg, pic)})
		}
	}
	return out
}

// caption names the page and the screen under its picture.
func caption(pg Page, pic Picture) string {
	name := pg.Path
	if pg.Title != "" {
		name = pg.Title + " (" + pg.Path + ")"
	}
	if pg.New {
		name += ", new"
	}
	return name + " — " + pic.Width
}

// cacheDir holds pictures by what they show (see Shooter.cacheKey), hard links to the jobs'
// files: Dir/.cache/<key>.png.
const cacheDir = ".cache"

func hashKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// cached returns the picture stored under key, if any.
func (s Store) cached(key string) (image.Image, bool) {
	f, err := os.Open(filepath.Join(s.Dir, cacheDir, key+".png"))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	img, err := png.Decode(f)
	return img, err == nil
}

// cache files a job's picture under key; a picture already there stays. Best effort.
func (s Store) cache(key, jobID, name string) {
	if key == "" || name == "" {
		return
	}
	src, err := s.path(jobID, name)
	if err != nil {
		return
	}
	dir := filepath.Join(s.Dir, cacheDir)
	if os.MkdirAll(dir, 0o755) == nil {
		_ = os.Link(src, filepath.Join(dir, key+".png"))
	}
}

// put stores a job's full-size picture: linked from the cache when it came from there, else
// encoded, written and filed in the cache (when it has a key).
func (s Store) put(jobID, name string, r result) error {
	p, err := s.path(jobID, name)
	if err != nil {
		return err
	}
	if r.cached && os.Link(filepath.Join(s.Dir, cacheDir, r.key+".png"), p) == nil {
		return nil
	}
	if err := os.WriteFile(p, encodePNG(r.img), 0o644); err != nil {
		return err
	}
	s.cache(r.key, jobID, name)
	return nil
}

// Keep is how long a job's pictures are kept, on each machine and in the engine (BlobStore's
// max age): as long as the job's record (broker.JobRetention), after which its page is gone too.
const Keep = broker.JobRetention

// Prune removes what has been kept long enough: the pictures of jobs taken here or fetched
// (Dir/<job>/, Dir/.remote/<job>/) last written more than Keep before now, fetches a killed
// process left (an hour), and cached pictures older than cacheAge. Best effort; safe beside
// Shoot and reads, which write what they use anew. It stops between directories once ctx
// ends (a first sweep may have thousands to remove).
func (s Store) Prune(ctx context.Context, now time.Time) {
	s.pruneCache(cacheAge, now)
	pruneDirs(ctx, s.Dir, func(name string) time.Duration {
		if strings.HasPrefix(name, ".") {
			return 0 // .cache, .remote
		}
		return Keep
	}, now)
	pruneDirs(ctx, filepath.Join(s.Dir, remoteDirName), func(name string) time.Duration {
		if strings.HasPrefix(name, ".fetch-") {
			return time.Hour
		}
		return Keep
	}, now)
}

// pruneDirs removes the directories in dir that hold only pictures and whose last write
// (the directory's or its report's, whichever is later) is more than keep(name) before now;
// 0 keeps one.
func pruneDirs(ctx context.Context, dir string, keep func(name string) time.Duration, now time.Time) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if ctx.Err() != nil {
			return
		}
		k := keep(e.Name())
		if !e.IsDir() || k == 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		last := time.Time{}
		for _, f := range []string{p, filepath.Join(p, reportName)} {
			if fi, err := os.Stat(f); err == nil && fi.ModTime().After(last) {
				last = fi.ModTime()
			}
		}
		// Read only when old: not a job's if it holds anything else (--shots may have been
		// given a directory shared with other things).
		if !last.IsZero() && now.Sub(last) > k && onlyPictures(p) {
			_ = os.RemoveAll(p)
		}
	}
}

// onlyPictures says whether dir holds nothing but files Shoot or a fetch writes, so removing
// it can lose nothing else.
func onlyPictures(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || !(validName.MatchString(n) || n == publishedName || n == versionName || n == ".report.tmp") {
			return false
		}
	}
	return true
}

// pruneCache deletes cached pictures older than maxAge; the jobs' own files stay.
func (s Store) pruneCache(maxAge time.Duration, now time.Time) {
	dir := filepath.Join(s.Dir, cacheDir)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > maxAge {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
