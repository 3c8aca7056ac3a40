package natsjs_test

import (
	"context"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/tenant"
)

// BenchmarkRecent20Of5000: the status page's query with 5,000 job records kept.
func BenchmarkRecent20Of5000(b *testing.B) {
	env := natsjstest.Start(b, natsjstest.Options{NoSync: true})
	ctx := context.Background()
	tn := tenant.ID{Project: "site", User: "alice"}
	for range 5000 {
		job := broker.Job{ID: broker.NewJobID(), Tenant: tn, Payload: []byte(`"x"`)}
		if err := env.Backend.Jobs.Create(ctx, broker.JobRecord{Job: job, State: broker.StateDone}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if recs, err := env.Backend.Jobs.Recent(ctx, 20); err != nil || len(recs) != 20 {
			b.Fatalf("%d records, %v", len(recs), err)
		}
	}
}
