package natsjs

import (
	"hash/fnv"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/tenant"
)

// defaultInboxShards: on this 2-core machine one stream takes about 7,300 synced publishes a
// second and two or more about 11,000 together (the disk's limit); a job costs its inbox
// two synced writes (the publish and, when acknowledged, the removal).
const defaultInboxShards = 4

// maxInboxShards bounds InboxShards.
const maxInboxShards = 64

// metaShards is the key on WO_IN's metadata that records the deployment's inbox shards.
const metaShards = "wo_inbox_shards"

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
func (a *adapter) shardOf(t tenant.ID) shard {
	if len(a.inbox) == 1 {
		return a.inbox[0]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(t.Subject()))
	return a.inbox[h.Sum32()%uint32(len(a.inbox))]
}
