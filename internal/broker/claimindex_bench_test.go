package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// BenchmarkClaimIndexOldest: a dispatcher's pick among the waiting requests of 500 tenants
// (a 1,000 × 1 bench keeps hundreds waiting), then its reservation ended.
func BenchmarkClaimIndexOldest(b *testing.B) {
	idx := newClaimIndex()
	now := time.Now()
	for i := range 500 {
		t := tenant.ID{Project: "p", User: fmt.Sprint("u", i)}
		idx.Apply(ClaimEntry{Tenant: t, Value: claimRecord{Since: now.Add(time.Duration(i)), At: now}.encode(), Version: uint64(i + 1)})
	}
	b.ResetTimer()
	for b.Loop() {
		t, _, ok, _ := idx.oldest("me", now)
		if !ok {
			b.Fatal("nothing waiting")
		}
		idx.taken(t)
	}
}
