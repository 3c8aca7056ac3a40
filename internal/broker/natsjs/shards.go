package natsjs

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/tenant"
)

// defaultInboxShards is a new single server's number of inbox shards (and so of result and
// lease shards). A server stores and fsyncs each stream's writes one after another, while
// the file system commits the fsyncs of different files together (ext4 on a 2-core machine:
// 1,400 a second on one file, 8,900 on four at once, 28,000 on sixteen). A job costs its
// inbox shard one synced write (the publish) and a share of its tenure's removal, its result
// shard one, and a claim its lease shard two; with fsyncs slowed to 2 ms, sixteen shards
// finished about twice the jobs a second of four.
const defaultInboxShards = 16

// defaultClusterShards is a new cluster's: each shard is a raft group on every member, which
// costs heartbeats at idle and an election after losing a server, and a replicated stream
// syncs on its raft log's flush, not on each write.
const defaultClusterShards = 4

// maxInboxShards bounds InboxShards.
const maxInboxShards = 64

// metaShards is the key on WO_IN's metadata that records the deployment's inbox shards.
const metaShards = "wo_inbox_shards"

// metaLeaseShards is the key on WO_IN's metadata that records the deployment's lease shards.
const metaLeaseShards = "wo_lease_shards"

// shard is one of the inbox's streams: WO_IN with subjects wo.in.<p>.<u>, or WO_IN_<k> with
// wo.in<k>.<p>.<u> (streams may not share subjects).
type shard struct {
	jetstream.Stream
	name, subject string // the stream's name, its subjects' prefix
}

func shardNamed(k int) shard {
	if k == 0 {
		return shard{name: streamInbox, subject: subjInbox}
	}
	return shard{name: streamInbox + "_" + strconv.Itoa(k), subject: "wo.in" + strconv.Itoa(k) + "."}
}

// shardOf is where t's jobs are: a hash of the tenant, so every process agrees.
func (a *adapter) shardOf(t tenant.ID) shard { return a.inbox[shardIndex(t, len(a.inbox))] }

// shardIndex is t's shard of n: a hash of the tenant.
func shardIndex(t tenant.ID, n int) int {
	if n == 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(t.Subject()))
	return int(h.Sum32() % uint32(n))
}

// resultShard is one of the results' streams, as many as the inbox's: WO_RESULTS with
// subjects wo.out.<p>.<u>, or WO_RESULTS_<k> with wo.out<k>.<p>.<u>; a tenant's results go
// to the shard its jobs are in. Each has the router's consumer. One stream took every job's
// result, one synced write after another: at about 2,700 a second it bounded the jobs
// finished per second (bench, 100 tenants × 20 drained).
type resultShard struct {
	stream   jetstream.Stream
	consumer jetstream.Consumer
	subject  string // the subjects' prefix
}

func resultShardNamed(k int) (name, subject string) {
	if k == 0 {
		return streamResults, subjResults
	}
	return streamResults + "_" + strconv.Itoa(k), "wo.out" + strconv.Itoa(k) + "."
}

// direct reports whether a direct get of the shard can be trusted: on one replica, whose only
// server is its leader. A follower may answer from behind: a job just published missed, or
// one just removed served again. The config is this process's cached one: an older binary's
// setup may have turned direct gets off since, and firstDirect then answers "no responders".
func (sh shard) direct() bool {
	cfg := sh.CachedInfo().Config
	return cfg.AllowDirect && cfg.Replicas <= 1
}

// firstDirect gets subj's first message at or after sequence from with one direct get,
// served by the stream itself rather than by the server's JetStream API workers (two per
// core, shared by every client): its sequence, the message, and how many of subj's follow it
// (-1: not told). The message is nil when there is none.
func (sh shard) firstDirect(ctx context.Context, nc *nats.Conn, subj string, from uint64) (uint64, *nats.Msg, int, error) {
	req, _ := json.Marshal(map[string]any{"seq": from, "next_by_subj": subj, "batch": 1})
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+sh.name, req)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("direct get from %s: %w", sh.name, err)
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404":
		return 0, nil, 0, nil
	default:
		return 0, nil, 0, fmt.Errorf("direct get from %s: answered %s %s", sh.name, status, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil || m.Header.Get("Nats-Subject") != subj {
		return 0, nil, 0, fmt.Errorf("direct get from %s: an answer without %s's sequence", sh.name, subj)
	}
	behind, err := strconv.Atoi(m.Header.Get("Nats-Num-Pending"))
	if err != nil {
		behind = -1
	}
	return seq, m, behind, nil
}

// directMsg is a message a direct get read: its sequence, the message, and how many of its
// subject's followed it then (-1: not told).
type directMsg struct {
	seq    uint64
	m      *nats.Msg
	behind int
}

// directBatch gets up to n of subj's first messages at or after sequence from with one direct
// get (as firstDirect; n > 1 listens on an inbox of its own for the batch and its end). None
// when there are none; nats.ErrNoResponders when the stream serves no direct gets.
func (sh shard) directBatch(ctx context.Context, nc *nats.Conn, subj string, from uint64, n int) ([]directMsg, error) {
	if n <= 1 {
		seq, m, behind, err := sh.firstDirect(ctx, nc, subj, from)
		if err != nil || m == nil {
			return nil, err
		}
		return []directMsg{{seq: seq, m: m, behind: behind}}, nil
	}
	// A buffer for the batch and its end, not the client's default for a subscription (64K
	// messages: half a megabyte allocated and cleared per read; TestABatchReadAllocatesLittle).
	answers := make(chan *nats.Msg, n+1)
	sub, err := nc.ChanSubscribe(nc.NewInbox(), answers)
	if err != nil {
		return nil, fmt.Errorf("direct get from %s: %w", sh.name, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(map[string]any{"seq": from, "next_by_subj": subj, "batch": n})
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+sh.name, sub.Subject, req); err != nil {
		return nil, fmt.Errorf("direct get from %s: %w", sh.name, err)
	}
	var out []directMsg
	for {
		var m *nats.Msg
		select {
		case m = <-answers:
		case <-ctx.Done():
			return nil, fmt.Errorf("direct get from %s: %w", sh.name, ctx.Err())
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204", "404": // the batch's end; none at all
			return out, nil
		case "503":
			return nil, nats.ErrNoResponders
		default:
			return nil, fmt.Errorf("direct get from %s: answered %s %s", sh.name, status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil || m.Header.Get("Nats-Subject") != subj {
			return nil, fmt.Errorf("direct get from %s: an answer without %s's sequence", sh.name, subj)
		}
		behind, err := strconv.Atoi(m.Header.Get("Nats-Num-Pending"))
		if err != nil {
			behind = -1
		}
		out = append(out, directMsg{seq: seq, m: m, behind: behind})
	}
}
