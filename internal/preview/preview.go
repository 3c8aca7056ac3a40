package preview

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// ErrUnsafeSource is returned by Deploy for a source tree it will not publish: a symlink that
// points outside the tree or at a directory, a file that is neither regular nor a symlink, or
// a name that is not valid UTF-8. The error names the offending path.
var ErrUnsafeSource = errors.New("unsafe source tree")

// Invalid project or thread names are reported with errors that match tenant.ErrInvalid.

// Site names a preview: a project's latest, and each thread's own.
type Site struct {
	Project string // ^[a-z0-9][a-z0-9-]{0,62}$
	Thread  string // same pattern
}

// Validate checks both names; the error matches tenant.ErrInvalid and suggests a valid name.
func (s Site) Validate() error {
	if err := tenant.ValidatePart("project", s.Project); err != nil {
		return err
	}
	return tenant.ValidatePart("thread", s.Thread)
}

// String returns "project/thread".
func (s Site) String() string { return s.Project + "/" + s.Thread }

// Deployment reports one deploy.
type Deployment struct {
	URLs      []string      // thread URL first, then the project's latest URL
	Version   string        // the deployed version id, unique within the thread
	Previous  Ref           // what the owner saw before: see Ref
	Written   int           // files whose bytes were written: new or changed content
	Unchanged int           // files hard-linked from the previous version (same sha256)
	Deleted   int           // files of the previous version absent from this one
	Bytes     int64         // bytes written
	Duration  time.Duration // wall time of the whole deploy
}

// Ref names one version of one thread of a deployment's project. A Deployment's Previous is
// the version live at the thread's URL before the deploy or, for a thread's first deploy, the
// one the project's latest URL showed (another thread's): the site as its owner last saw it.
// Zero when the project had no preview yet.
type Ref struct {
	Thread  string
	Version string
}

// IsZero reports whether r names no version.
func (r Ref) IsZero() bool { return r.Version == "" }

// Target publishes built sites.
type Target interface {
	// Deploy publishes the directory dir as site.Thread's preview and as site.Project's
	// latest, atomically: a reader sees the old site or the new one, never a mix. Safe for
	// concurrent use; concurrent deploys of the same site are serialized.
	//
	// ctx bounds the wait for a concurrent deploy of the same site and the upload; a cancelled
	// ctx returns ctx.Err() unwrapped and leaves the previous version live. Deploy does not
	// retry. Deploying the same tree again is harmless: it publishes a new version whose files
	// are all unchanged. An invalid site name fails with an error matching tenant.ErrInvalid;
	// a tree Deploy refuses to publish fails with ErrUnsafeSource.
	Deploy(ctx context.Context, site Site, dir string) (Deployment, error)
}

// Production publishes a project's live site.
type Production interface {
	// DeployProduction publishes dir as project's live site with the same guarantees as
	// Target.Deploy (atomic switch, concurrent deploys serialized, ctx bounds the wait), and
	// reports the live URL as the Deployment's only URL. Previews are not touched.
	DeployProduction(ctx context.Context, project, dir string) (Deployment, error)
}

// Baselines keeps what a thread started from.
type Baselines interface {
	// DeployBaseline publishes dir as site.Thread's preview with the same guarantees as
	// Target.Deploy, but leaves the project's latest alone: dir is what the owner had when the
	// thread started (the live site, or the default branch's build), not a change of theirs.
	// The thread's next Deploy then reports it as its Previous, so the thread's first change
	// is compared with it. The Deployment's only URL is the thread's.
	DeployBaseline(ctx context.Context, site Site, dir string) (Deployment, error)
}

// LiveURL returns the address of project's live site: http://<project>.<domain>:<port>/ (an
// empty domain means "localhost", port 0 leaves the port out).
func LiveURL(project string, port int, domain string) string {
	if domain == "" {
		domain = "localhost"
	}
	host := project + "." + domain
	if port != 0 {
		host += ":" + strconv.Itoa(port)
	}
	return "http://" + host + "/"
}

// URLs returns the preview addresses of site: http://<thread>.edit.<project>.<domain>:<port>/
// and then http://edit.<project>.<domain>:<port>/. An empty domain means "localhost", port 0
// leaves the port out, and an empty site.Thread leaves the thread URL out.
func URLs(site Site, port int, domain string) []string {
	if domain == "" {
		domain = "localhost"
	}
	hostPort := "edit." + site.Project + "." + domain
	if port != 0 {
		hostPort += ":" + strconv.Itoa(port)
	}
	latest := fmt.Sprintf("http://%s/", hostPort)
	if site.Thread == "" {
		return []string{latest}
	}
	return []string{fmt.Sprintf("http://%s.%s/", site.Thread, hostPort), latest}
}
