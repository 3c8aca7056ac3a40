package project

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// ErrThreadOwner: a thread belongs to another user.
var ErrThreadOwner = errors.New("thread belongs to another user")

// Thread is one conversation: its branch and the agent session that continues it.
type Thread struct {
	ID      string    `json:"id"`
	Tenant  tenant.ID `json:"tenant"`
	Branch  string    `json:"branch"`
	Agent   string    `json:"agent,omitempty"`   // agent kind the session belongs to
	Session string    `json:"session,omitempty"` // agent session id; empty until the first run
	// Interrupted are the thread's jobs a newer instruction on it took over, not yet handed
	// to a job that ran its agent: the next job is told what they were asked and had done.
	Interrupted []InterruptedJob `json:"interrupted,omitempty"`
	// Publishes are the thread's publishes to production, oldest first ("undo" reverts the
	// last one not undone yet).
	Publishes []Publish `json:"publishes,omitempty"`
	// Built is the thread's last preview with the tree it was built from, so that publishing
	// that same tree deploys the preview instead of building it again. Nil until a job of
	// the thread has deployed and pushed.
	Built *Built `json:"built,omitempty"`
	// Baseline is what the owner had when the thread started, kept as a version of the
	// thread's preview for its pictures to compare with. Nil until a job of the thread that
	// takes pictures has captured it.
	Baseline *Baseline `json:"baseline,omitempty"`
	// MessageIDs are the email Message-IDs seen on the thread (for In-Reply-To matching).
	MessageIDs []string  `json:"messageIds,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// InterruptedJob is a job of a thread that was interrupted by a newer instruction on it.
type InterruptedJob struct {
	Job         string `json:"job"`
	Instruction string `json:"instruction"`
	// Commit holds the partial work; empty when the job had changed nothing.
	Commit string `json:"commit,omitempty"`
	// Files are the partial work's changed paths, as "M path".
	Files   []string `json:"files,omitempty"`
	Summary string   `json:"summary,omitempty"`
}

// Built is one preview version of a thread and the git tree it was built from.
type Built struct {
	Tree    string `json:"tree"`    // the committed tree the preview was built from
	Version string `json:"version"` // the preview version (preview.Deployment.Version)
	Job     string `json:"job"`
}

// Baseline is the site as the owner had it when a thread started.
type Baseline struct {
	Version string `json:"version"` // the thread's preview version holding it (preview.Baselines)
	From    string `json:"from"`    // BaselineLive or BaselineBuild
	Commit  string `json:"commit"`  // the commit the thread started from
	Job     string `json:"job"`     // the job that captured it
}

// Where a Baseline came from.
const (
	BaselineLive  = "live"  // the project's live site
	BaselineBuild = "build" // the default branch's build at Baseline.Commit (never published)
)

// Publish is one publish of a thread's branch to production.
type Publish struct {
	Job string `json:"job"`
	// Before and After are the default branch's commits around the publish.
	Before string    `json:"before"`
	After  string    `json:"after"`
	URL    string    `json:"url"`
	At     time.Time `json:"at"`
	// UndoneBy is the undo job that reverted it; empty while it is live.
	UndoneBy string `json:"undoneBy,omitempty"`
	// Replaced is the kept build the live site served before this publish, when it was a
	// thread's preview: an undo that restores its tree deploys it instead of building.
	Replaced *Live `json:"replaced,omitempty"`
}

// Live is a project's live site when it was deployed from a thread's preview: that preview
// version and the tree it was built from.
type Live struct {
	Thread string `json:"thread"`
	Built
}

// LastLive returns the index of the thread's last publish not undone, or -1.
func (t Thread) LastLive() int {
	for i := len(t.Publishes) - 1; i >= 0; i-- {
		if t.Publishes[i].UndoneBy == "" {
			return i
		}
	}
	return -1
}

// Threads keeps threads in a broker table.
type Threads struct{ t broker.Table }

// OpenThreads opens the threads table of b.
func OpenThreads(ctx context.Context, b *broker.Backend) (*Threads, error) {
	t, err := b.Table(ctx, "threads")
	if err != nil {
		return nil, err
	}
	return &Threads{t: t}, nil
}

// Ensure returns thread id for t, creating it (branch thread-<id>) on first use. A thread
// used by another tenant returns ErrThreadOwner.
func (s *Threads) Ensure(ctx context.Context, id string, t tenant.ID) (Thread, error) {
	th, _, err := s.get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		now := time.Now().UTC()
		th = Thread{ID: id, Tenant: t, Branch: "thread-" + id, CreatedAt: now, UpdatedAt: now}
		data, _ := json.Marshal(th)
		if _, err = s.t.Create(ctx, id, data); errors.Is(err, broker.ErrExists) {
			return s.Ensure(ctx, id, t)
		}
	}
	if err != nil {
		return th, err
	}
	if th.Tenant != t {
		return th, fmt.Errorf("%w: thread %s is %s's, not %s's", ErrThreadOwner, id, th.Tenant, t)
	}
	return th, nil
}

// Get returns the thread or ErrNotFound.
func (s *Threads) Get(ctx context.Context, id string) (Thread, error) {
	th, _, err := s.get(ctx, id)
	return th, err
}

func (s *Threads) get(ctx context.Context, id string) (Thread, uint64, error) {
	data, ver, err := s.t.Get(ctx, id)
	if errors.Is(err, broker.ErrNotFound) {
		return Thread{}, 0, fmt.Errorf("%w: no thread %q", ErrNotFound, id)
	}
	if err != nil {
		return Thread{}, 0, err
	}
	var th Thread
	if err := json.Unmarshal(data, &th); err != nil {
		return Thread{}, 0, fmt.Errorf("thread %s: %w", id, err)
	}
	return th, ver, nil
}

// liveKey is where the threads table keeps a project's live record: no thread id has a '_'.
func liveKey(project string) string { return "_live." + project }

// Live returns what project's live site was deployed from; nil when it was built afresh,
// never published or the record is unreadable (a build is always a correct answer).
func (s *Threads) Live(ctx context.Context, project string) *Live {
	data, _, err := s.t.Get(ctx, liveKey(project))
	if err != nil {
		return nil
	}
	var l Live
	if json.Unmarshal(data, &l) != nil || l.Version == "" {
		return nil
	}
	return &l
}

// SetLive records what project's live site now serves: l, or nil for a fresh build.
func (s *Threads) SetLive(ctx context.Context, project string, l *Live) error {
	data := []byte("{}")
	if l != nil {
		data, _ = json.Marshal(l)
	}
	_, err := s.t.Put(ctx, liveKey(project), data)
	return err
}

// Update applies fn to the stored thread with compare-and-set, retrying on conflicts.
func (s *Threads) Update(ctx context.Context, id string, fn func(*Thread)) (Thread, error) {
	for {
		th, ver, err := s.get(ctx, id)
		if err != nil {
			return th, err
		}
		fn(&th)
		th.UpdatedAt = time.Now().UTC()
		data, _ := json.Marshal(th)
		if _, err = s.t.Update(ctx, id, data, ver); !errors.Is(err, broker.ErrConflict) {
			return th, err
		}
	}
}
