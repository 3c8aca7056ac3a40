package s3target

import (
	"context"
	"fmt"
	"strconv"

	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/tenant"
)

var _ preview.Versions = (*Store)(nil)

// Version implements preview.Versions: a version whose manifest the thread still keeps
// (Config.Keep). Blobs are read from S3 as the Version is served, without ctx's deadline.
func (s *Store) Version(ctx context.Context, site preview.Site, id string) (*preview.Version, error) {
	if err := site.Validate(); err != nil {
		return nil, err
	}
	if n, err := strconv.Atoi(id); err != nil || n <= 0 || strconv.Itoa(n) != id {
		return nil, fmt.Errorf("%w: version %q of %s is not a version number", preview.ErrNoVersion, id, site)
	}
	l := s.threadLine(site)
	m, err := s.manifest(ctx, l.versions+id+".json")
	if notFound(err) {
		return nil, fmt.Errorf("%w: version %s of %s", preview.ErrNoVersion, id, site)
	}
	if err != nil {
		return nil, fmt.Errorf("read version %s of %s: %w", id, site, err)
	}
	return preview.NewVersion(m, s.opener(context.WithoutCancel(ctx), l.blobs), site.Thread, id), nil
}

var _ preview.LiveVersions = (*Store)(nil)

// LiveVersion implements preview.LiveVersions: the version the project's live pointer names.
func (s *Store) LiveVersion(ctx context.Context, project string) (*preview.Version, error) {
	if err := tenant.ValidatePart("project", project); err != nil {
		return nil, err
	}
	l := s.liveLine(project)
	p, err := s.readPointer(ctx, l.pointers[0])
	if err != nil {
		return nil, err
	}
	if p.target == "" || p.version == 0 {
		return nil, fmt.Errorf("%w: %s has no live site", preview.ErrNoVersion, project)
	}
	m, err := s.manifest(ctx, p.target)
	if err != nil {
		return nil, fmt.Errorf("read the live site of %s: %w", project, err)
	}
	return preview.NewVersion(m, s.opener(context.WithoutCancel(ctx), l.blobs), "", strconv.Itoa(p.version)), nil
}
