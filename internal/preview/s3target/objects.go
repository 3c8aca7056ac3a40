package s3target

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/webordinary/webordinary/internal/preview"

	"github.com/webordinary/webordinary/internal/awserr"
)

// maxSwitchTries bounds the retries of a conditional write that lost a race.
const maxSwitchTries = 8

// pointer is what a pointer object said when read: the manifest key it names, its ETag and
// the fences of the deploys that switched it (its metadata, fencesMeta).
type pointer struct {
	target  string // "" when the pointer does not exist
	etag    string
	version int // the version number in target; 0 when none
	fences  preview.Fences
}

// fencesMeta is the user metadata key (x-amz-meta-fences) that keeps a pointer's fences.
const fencesMeta = "fences"

// readPointer reads the pointer object key.
func (s *Store) readPointer(ctx context.Context, key string) (pointer, error) {
	out, err := s.cfg.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &key})
	if notFound(err) {
		return pointer{}, nil
	}
	if err != nil {
		return pointer{}, fmt.Errorf("read %s: %w", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 4096))
	if err != nil {
		return pointer{}, fmt.Errorf("read %s: %w", key, err)
	}
	target := strings.TrimSpace(string(b))
	fences, err := preview.ParseFences(out.Metadata[fencesMeta])
	if err != nil {
		return pointer{}, fmt.Errorf("read %s: %w", key, err)
	}
	return pointer{target: target, etag: aws.ToString(out.ETag), version: versionOf(target), fences: fences}, nil
}

// versionOf returns n of ".../versions/<n>.json", or 0.
func versionOf(key string) int {
	n, err := strconv.Atoi(strings.TrimSuffix(path.Base(key), ".json"))
	if err != nil {
		return 0
	}
	return n
}

// manifest returns the manifest stored at key (cached: manifests never change).
func (s *Store) manifest(ctx context.Context, key string) (preview.Manifest, error) {
	if m, ok := s.manifests.get(key); ok {
		return m, nil
	}
	out, err := s.cfg.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &key})
	if err != nil {
		return preview.Manifest{}, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return preview.Manifest{}, err
	}
	m, err := preview.DecodeManifest(key, b)
	if err != nil {
		return preview.Manifest{}, err
	}
	s.manifests.put(key, m)
	return m, nil
}

// upload hashes every file of dir and uploads the content not in known; it returns the new
// manifest and the counts (Deleted aside).
func (s *Store) upload(ctx context.Context, l line, dir string, known map[string]int64) (preview.Manifest, preview.Deployment, error) {
	u := uploader{s: s, l: l, known: known, m: preview.Manifest{Files: map[string]preview.ManifestEntry{}}, sent: map[string]bool{}}
	err := preview.WalkSource(ctx, dir, s.cfg.Workers, func(f preview.SourceFile) error { return u.place(ctx, f) })
	return u.m, u.dep, err
}

// uploader collects the result of one deploy's uploads.
type uploader struct {
	s     *Store
	l     line
	known map[string]int64

	mu   sync.Mutex
	m    preview.Manifest
	dep  preview.Deployment
	sent map[string]bool // blobs this deploy uploaded or is uploading
}

// place hashes one file and uploads it unless its blob is known or already being uploaded.
func (u *uploader) place(ctx context.Context, f preview.SourceFile) error {
	e, err := f.Hash()
	if err != nil {
		return err
	}
	u.mu.Lock()
	size, ok := u.known[e.SHA256]
	kept := (ok && size == e.Size) || u.sent[e.SHA256]
	u.sent[e.SHA256] = true
	u.mu.Unlock()
	if !kept {
		if err := u.put(ctx, f, e); err != nil {
			return err
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.m.Files[f.Path] = e
	if kept {
		u.dep.Unchanged++
	} else {
		u.dep.Written++
		u.dep.Bytes += e.Size
	}
	return nil
}

// put uploads f as the blob of e.
func (u *uploader) put(ctx context.Context, f preview.SourceFile, e preview.ManifestEntry) error {
	file, size, err := f.Open()
	if err != nil {
		return err
	}
	defer file.Close()
	if size != e.Size {
		return fmt.Errorf("%s changed while it was published; build again", f.Path)
	}
	key := u.l.blobs + e.SHA256
	_, err = u.s.cfg.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: &u.s.cfg.Bucket, Key: &key, Body: file,
		ContentLength: aws.Int64(size), ContentType: aws.String("application/octet-stream")})
	if err != nil {
		return fmt.Errorf("upload %s: %w", f.Path, err)
	}
	return nil
}

// writeManifest stores m as version n of the line, or a higher number when n is taken (by a
// deploy that never switched, or by another process); it returns the key and the number.
func (s *Store) writeManifest(ctx context.Context, l line, m preview.Manifest, n int) (string, int, error) {
	body, err := preview.EncodeManifest(m)
	if err != nil {
		return "", 0, err
	}
	for range maxSwitchTries {
		key := l.versions + strconv.Itoa(n) + ".json"
		_, err := s.cfg.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.cfg.Bucket, Key: &key,
			Body: bytes.NewReader(body), IfNoneMatch: aws.String("*"), ContentType: aws.String("application/json")})
		if err == nil {
			s.manifests.put(key, m)
			return key, n, nil
		}
		if !preconditionFailed(err) {
			return "", 0, fmt.Errorf("write manifest %s: %w", key, err)
		}
		if n, err = s.topVersion(ctx, l); err != nil {
			return "", 0, err
		}
		n++
	}
	return "", 0, errors.New("write manifest: version numbers kept being taken; try again")
}

// topVersion lists the line's manifests and returns the highest number.
func (s *Store) topVersion(ctx context.Context, l line) (int, error) {
	keys, err := s.list(ctx, l.versions)
	top := 0
	for _, k := range keys {
		top = max(top, versionOf(k))
	}
	return top, err
}

// list returns every key under prefix.
func (s *Store) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.cfg.Client, &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return keys, fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// switchPointers points the line's own pointer, then the others, at the manifest key
// (version n). cur is what the own pointer said before the deploy. A deploy fenced by ctx
// (preview.WithFence) that one of the pointers refuses switches none: each is read and
// checked first, and each switch checks again in its conditional write.
func (s *Store) switchPointers(ctx context.Context, l line, key string, n int, cur pointer) error {
	f := preview.FenceOf(ctx)
	if err := s.admit(ctx, l, cur, f); err != nil {
		return err
	}
	if err := s.swap(ctx, l.pointers[0], key, n, cur, true, f); err != nil {
		return err
	}
	for _, p := range l.pointers[1:] {
		now, err := s.readPointer(ctx, p)
		if err == nil {
			err = s.swap(ctx, p, key, n, now, false, f)
		}
		if err != nil {
			return fmt.Errorf("the thread's version is live but %s was not switched: %w", p, err)
		}
	}
	return nil
}

// admit checks fence f against the line's pointers (cur is its own, as read) before any
// switch.
func (s *Store) admit(ctx context.Context, l line, cur pointer, f *preview.Fence) error {
	if f == nil {
		return nil
	}
	if err := cur.fences.Admit(f, l.pointers[0]); err != nil {
		return err
	}
	for _, p := range l.pointers[1:] {
		now, err := s.readPointer(ctx, p)
		if err == nil {
			err = now.fences.Admit(f, p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// swap writes target into the pointer object key if it still is what was read (ETag); when
// another writer got there first it reads again and retries. With monotonic, a pointer that
// already names a higher version of the same line is left alone (that deploy is newer). The
// fence f is checked against the pointer as read and written into it with the target, so the
// check and the switch are one conditional write.
func (s *Store) swap(ctx context.Context, key, target string, n int, was pointer, monotonic bool, f *preview.Fence) error {
	for range maxSwitchTries {
		if err := was.fences.Admit(f, key); err != nil {
			return err
		}
		if monotonic && was.version > n && path.Dir(was.target) == path.Dir(target) {
			return nil
		}
		in := &s3.PutObjectInput{Bucket: &s.cfg.Bucket, Key: &key, Body: strings.NewReader(target),
			ContentType: aws.String("text/plain"), CacheControl: aws.String("no-cache")}
		if fences := was.fences.With(f); len(fences) > 0 {
			in.Metadata = map[string]string{fencesMeta: fences.String()}
		}
		if was.etag == "" {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(was.etag)
		}
		_, err := s.cfg.Client.PutObject(ctx, in)
		if err == nil {
			return nil
		}
		if !preconditionFailed(err) {
			return fmt.Errorf("switch %s: %w", key, err)
		}
		if was, err = s.readPointer(ctx, key); err != nil {
			return err
		}
	}
	return fmt.Errorf("switch %s: other deploys kept winning; try again", key)
}

// prune deletes the line's manifests older than the newest Keep (the live one is n).
func (s *Store) prune(ctx context.Context, l line, n int) {
	if n <= s.cfg.Keep {
		return
	}
	keys, err := s.list(ctx, l.versions)
	var del []types.ObjectIdentifier
	for _, k := range keys {
		if v := versionOf(k); v > 0 && v <= n-s.cfg.Keep {
			del = append(del, types.ObjectIdentifier{Key: aws.String(k)})
		}
	}
	if err == nil && len(del) > 0 {
		_, err = s.cfg.Client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &s.cfg.Bucket,
			Delete: &types.Delete{Objects: del, Quiet: aws.Bool(true)}})
	}
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "s3target: prune old manifests", "site", l.name, "error", err)
	}
}

// notFound reports a missing key.
func notFound(err error) bool {
	var nsk *types.NoSuchKey
	return errors.As(err, &nsk) || awserr.HasCode(err, "NoSuchKey", "NotFound")
}

// preconditionFailed reports a lost conditional write (412, or 409 for a concurrent one).
func preconditionFailed(err error) bool {
	return awserr.HasCode(err, "PreconditionFailed", "ConditionalRequestConflict")
}

// manifestCache keeps decoded manifests by key (they are immutable), bounded.
type manifestCache struct {
	mu  sync.Mutex
	max int
	m   map[string]preview.Manifest
}

func newManifestCache(max int) *manifestCache {
	return &manifestCache{max: max, m: map[string]preview.Manifest{}}
}

func (c *manifestCache) get(key string) (preview.Manifest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.m[key]
	return m, ok
}

func (c *manifestCache) put(key string, m preview.Manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if len(c.m) < c.max {
			break
		}
		delete(c.m, k)
	}
	c.m[key] = m
}
