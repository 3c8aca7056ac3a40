package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// engineUse is what the engine has done so far: the messages each stream stored (every one a
// write of its own, fsync'd unless the stream persists asynchronously or in memory), the
// JetStream API requests it served and the messages clients sent it.
type engineUse struct {
	stored map[string]uint64 // by stream, synced streams only
	other  uint64            // stored by streams in memory or persisting asynchronously
	api    uint64
	apiErr uint64
	msgs   int64
}

// engineNow reads srv's counters.
func engineNow(srv *server.Server) engineUse {
	u := engineUse{stored: map[string]uint64{}}
	if v, err := srv.Varz(nil); err == nil {
		u.msgs = v.InMsgs
	}
	js, err := srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Config: true})
	if err != nil {
		return u
	}
	u.api = js.API.Total
	u.apiErr = js.API.Errors
	for _, a := range js.AccountDetails {
		for _, s := range a.Streams {
			if s.Config != nil && (s.Config.Storage == server.MemoryStorage || s.Config.PersistMode != server.DefaultPersistMode) {
				u.other += s.State.LastSeq
				continue
			}
			u.stored[streamKind(s.Name)] += s.State.LastSeq
		}
	}
	return u
}

// streamKind names a stream's kind: a shard's stream counts with its first (WO_IN_3: WO_IN).
func streamKind(name string) string {
	for _, base := range []string{"WO_IN", "WO_RESULTS", "KV_wo_leases"} {
		if strings.HasPrefix(name, base) {
			return base
		}
	}
	return name
}

// perJob describes what the engine did between u0 and u per job of n: synced writes by stream
// (messages stored; removals are not counted), other writes, JetStream API requests (direct
// gets are not among them) and messages in.
func perJob(u0, u engineUse, n int) string {
	var total uint64
	var parts []string
	names := make([]string, 0, len(u.stored))
	for name := range u.stored {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d := u.stored[name] - u0.stored[name]
		if d == 0 {
			continue
		}
		total += d
		parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(d)/float64(n)))
	}
	f := float64(n)
	return fmt.Sprintf("engine per job: %.2f synced writes (%s), %.2f unsynced, %.2f API requests (%.2f errors), %.1f messages in",
		float64(total)/f, strings.Join(parts, ", "), float64(u.other-u0.other)/f, float64(u.api-u0.api)/f, float64(u.apiErr-u0.apiErr)/f, float64(u.msgs-u0.msgs)/f)
}
