package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// fences keeps a fence key per tenant in one stream: its value is the token of the tenant's
// newest lease acquisition. Leases.Acquire raises it (a compare-and-set from the key it read,
// never to a lower token) before it returns, and a holder's write into the same stream is
// conditioned on the key still being at the sequence that carries the holder's token
// (Nats-Expected-Last-Subject-Sequence with the fence key as its subject): once a newer owner
// acquired the tenant, the stream itself refuses the older owner's write. A fence key that is
// missing (aged out with the stream's MaxAge) or carries an older token is raised by the next
// holder that needs it. Two streams carry fence keys:
//   - the tenant's result shard, subject "<shard's subject>f.<p>.<u>" (wo.out.f.site.alice):
//     a holder's results (results.PublishFenced);
//   - the job records' stream, subject "$KV.wo_jobs.<g>._fence.<p>.<u>" (jobsFenceSubject): a
//     holder's record writes and settles of its deliveries (see settleMark).
type fences struct {
	a *adapter
	// at is where t's fence key is: its stream and subject.
	at func(t tenant.ID) (jetstream.Stream, string)
	mu sync.Mutex
	// seen is each tenant's fence key as this process last wrote or read it (bounded).
	seen map[string]fenceMark
}

// fenceMark is a fence key's token and its stream sequence (0: no key).
type fenceMark struct{ token, seq uint64 }

func (sh resultShard) fenceSubject(t tenant.ID) string { return sh.subject + "f." + t.Subject() }

// resultFences are the fence keys in the result shards.
func resultFences(a *adapter) *fences {
	return &fences{a: a, at: func(t tenant.ID) (jetstream.Stream, string) {
		sh := a.results[shardIndex(t, len(a.results))]
		return sh.stream, sh.fenceSubject(t)
	}}
}

// settleFences are the fence keys in the job records' stream.
func settleFences(a *adapter) *fences {
	return &fences{a: a, at: func(t tenant.ID) (jetstream.Stream, string) {
		return a.jobsStream, jobsFenceSubject(t)
	}}
}

// jobsFenceSubject is t's fence key in the job records' stream, under the prefix of t's
// group of records (see recordKey); no job id starts with '_'.
func jobsFenceSubject(t tenant.ID) string {
	return "$KV." + bucketJobs + "." + broker.JobGroup(t) + "._fence." + t.Subject()
}

// mark returns t's fence key carrying token: the one remembered, unless reread, else read,
// and raised to token when it carries an older one. ErrLeaseLost when it carries a newer one.
// A remembered key with an older token is raised without a read first.
func (f *fences) mark(ctx context.Context, t tenant.ID, token uint64, reread bool) (fenceMark, error) {
	m, ok := f.remembered(t)
	switch {
	case ok && m.token == token && !reread:
		return m, nil
	case ok && m.token < token:
		// This process's last tenure of t left the key at m: raised from there unless
		// someone wrote it since, with no read (a new tenure of a tenant it held before).
		m, err := f.raise(ctx, t, token, m.seq)
		if !errors.Is(err, broker.ErrConflict) {
			return m, err
		}
	}
	for range maxFenceTries {
		m, err := f.read(ctx, t)
		switch {
		case err != nil:
			return m, err
		case m.token > token:
			return m, fmt.Errorf("natsjs: tenant %s was acquired with token %d, after %d: %w", t, m.token, token, broker.ErrLeaseLost)
		case m.token == token:
			f.remember(t, m)
			return m, nil
		}
		m, err = f.raise(ctx, t, token, m.seq)
		if !errors.Is(err, broker.ErrConflict) {
			return m, err
		}
	}
	return fenceMark{}, fmt.Errorf("natsjs: the fence of %s keeps changing; try again", t)
}

// markNew is mark for a new acquisition (read again), which when first writes t's fence key
// on the condition that it has none, before any read.
func (f *fences) markNew(ctx context.Context, t tenant.ID, token uint64, first bool) (fenceMark, error) {
	if _, ok := f.remembered(t); first && !ok {
		m, err := f.raise(ctx, t, token, 0)
		if !errors.Is(err, broker.ErrConflict) {
			return m, err
		}
	}
	return f.mark(ctx, t, token, true)
}

// maxFenceTries bounds mark's compare-and-set attempts.
const maxFenceTries = 5

// read gets t's fence key from its stream (see lastMsg).
func (f *fences) read(ctx context.Context, t tenant.ID) (fenceMark, error) {
	stream, subject := f.at(t)
	m, err := f.a.lastMsg(ctx, stream, subject)
	if err != nil {
		return fenceMark{}, ctxErr(ctx, fmt.Errorf("natsjs: read the fence of %s: %w", t, err))
	}
	return fenceOf(t, m)
}

// fenceOf decodes t's fence key as read (none: token 0).
func fenceOf(t tenant.ID, m lastMessage) (fenceMark, error) {
	if m.seq == 0 {
		return fenceMark{}, nil
	}
	token, err := strconv.ParseUint(string(m.data), 10, 64)
	if err != nil {
		return fenceMark{}, fmt.Errorf("natsjs: the fence of %s: %w", t, err)
	}
	return fenceMark{token: token, seq: m.seq}, nil
}

// lastMessage is a subject's last message in a stream: its sequence (0: none), subject,
// data, and whether it is a key's delete or purge marker.
type lastMessage struct {
	seq     uint64
	subject string
	data    []byte
	deleted bool
}

// lastMsg reads the last message of subj (a filter may have wildcards) in s. On one replica
// it is a direct get; on more, a request to the stream's leader, since a direct get may be
// answered by a follower that is behind: a fence key or record older than the stream's view
// that a fenced write is conditioned on.
func (a *adapter) lastMsg(ctx context.Context, s jetstream.Stream, subj string) (lastMessage, error) {
	cfg := s.CachedInfo().Config
	if cfg.Replicas <= 1 {
		m, err := s.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return lastMessage{}, nil
		}
		if err != nil {
			return lastMessage{}, err
		}
		return lastMessage{seq: m.Sequence, subject: m.Subject, data: m.Data, deleted: m.Header.Get("KV-Operation") != ""}, nil
	}
	req, _ := json.Marshal(map[string]string{"last_by_subj": subj})
	resp, err := a.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+cfg.Name, req)
	if err != nil {
		return lastMessage{}, err
	}
	var r struct {
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Hdrs    []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	switch err := json.Unmarshal(resp.Data, &r); {
	case err != nil:
		return lastMessage{}, fmt.Errorf("get the last message of %s from %s: %w", subj, cfg.Name, err)
	case r.Error != nil && r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return lastMessage{}, nil
	case r.Error != nil:
		return lastMessage{}, r.Error
	case r.Message == nil:
		return lastMessage{}, fmt.Errorf("get the last message of %s from %s: an empty answer", subj, cfg.Name)
	}
	m := lastMessage{seq: r.Message.Seq, subject: r.Message.Subject, data: r.Message.Data}
	if len(r.Message.Hdrs) > 0 {
		h, err := nats.DecodeHeadersMsg(r.Message.Hdrs)
		if err != nil {
			return lastMessage{}, fmt.Errorf("get the last message of %s from %s: %w", subj, cfg.Name, err)
		}
		m.deleted = h.Get("KV-Operation") != ""
	}
	return m, nil
}

// raise writes token to t's fence key if it is still at seq; broker.ErrConflict when it is not.
func (f *fences) raise(ctx context.Context, t tenant.ID, token, seq uint64) (fenceMark, error) {
	_, subject := f.at(t)
	ack, err := f.a.js.Publish(ctx, subject, []byte(strconv.FormatUint(token, 10)),
		jetstream.WithExpectLastSequencePerSubject(seq))
	if isWrongLastSeq(err) {
		return fenceMark{}, broker.ErrConflict
	}
	if err != nil {
		return fenceMark{}, ctxErr(ctx, fmt.Errorf("natsjs: raise the fence of %s: %w", t, err))
	}
	m := fenceMark{token: token, seq: ack.Sequence}
	f.remember(t, m)
	return m, nil
}

func (f *fences) remembered(t tenant.ID) (fenceMark, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.seen[t.Subject()]
	return m, ok
}

func (f *fences) remember(t tenant.ID, m fenceMark) {
	f.mu.Lock()
	defer f.mu.Unlock()
	putBounded(&f.seen, t.Subject(), m)
}

// settleMark records a holder's settle of its delivery of t's message seq (Ack, Retry,
// DeadLetter) in the job records' stream, subject "$KV.wo_jobs._done.<p>.<u>" (the value is
// the message's inbox sequence), on the condition that t's fence key there still carries
// token: ErrLeaseLost, and nothing written, once a newer owner acquired t. The queue acts on a
// settle only after its mark is accepted (it moves its cursor past an acknowledged job, whose
// removal then comes with the others', or holds a retried one back), so a job is removed from
// the inbox only once the store accepted its removal, or its result (delivery.fence: no mark
// then), under its remover's lease. A mark that
// meets a changed fence key reads it again once. On a single server the records' stream
// persists asynchronously: a crash of the server may lose a raise of the key, and the
// previous owner's settles then pass until the holder's next settle raises it again.
func (a *adapter) settleMark(ctx context.Context, t tenant.ID, token, seq uint64) error {
	value := []byte(strconv.FormatUint(seq, 10))
	for try := range 2 {
		m, err := a.settles.mark(ctx, t, token, try > 0)
		if err != nil {
			return err
		}
		_, err = a.js.Publish(ctx, jobsDoneSubject(t), value, jetstream.WithExpectLastSequenceForSubject(m.seq, jobsFenceSubject(t)))
		if isWrongLastSeq(err) {
			continue
		}
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("natsjs: settle %s's job at %d: %w", t, seq, err))
		}
		return nil
	}
	return fmt.Errorf("natsjs: settle %s's job at %d: the fence of %s keeps changing; try again", t, seq, t)
}

// jobsDoneSubject is t's settle mark in the job records' stream.
func jobsDoneSubject(t tenant.ID) string { return "$KV." + bucketJobs + "._done." + t.Subject() }

// finishedJobs are the jobs whose results this client published fenced, each with the token
// the publish was conditioned on (bounded: a job forgotten writes its settle mark).
type finishedJobs struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (f *finishedJobs) add(id string, token uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	putBounded(&f.m, id, token)
}

// take reports whether id's result was published under token, and forgets it.
func (f *finishedJobs) take(id string, token uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.m[id]
	delete(f.m, id)
	return ok && t == token
}
