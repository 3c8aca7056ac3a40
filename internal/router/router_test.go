package router_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
)

func TestSubmitValidatesWithActionableErrors(t *testing.T) {
	t.Parallel()
	env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
	r, _ := router.New(router.Config{Backend: env.Backend})
	cases := []router.Request{
		{Project: "My Site", User: "alice", Instruction: "x"},
		{Project: "site", User: "", Instruction: "x"},
		{Project: "site", User: "alice", Instruction: "  "},
		{Project: "site", User: "alice", Thread: "../t", Instruction: "x"},
		{Project: "site", User: "alice", Instruction: "x", JobID: "nope"},
	}
	for _, c := range cases {
		if _, err := r.Submit(context.Background(), c); !errors.Is(err, router.ErrInvalid) {
			t.Errorf("Submit(%+v) = %v; want ErrInvalid", c, err)
		}
	}
	if n, _ := env.Backend.Inbox.Pending(context.Background(), tenant.ID{Project: "site", User: "alice"}); n != 0 {
		t.Fatalf("invalid requests queued %d jobs", n)
	}
}

func TestSubmitWithJobIDIsIdempotent(t *testing.T) {
	t.Parallel()
	env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
	r, _ := router.New(router.Config{Backend: env.Backend})
	id := broker.JobIDAt(time.Now(), "<m1@example.com>")
	req := router.Request{JobID: id, Project: "site", User: "alice", Instruction: "x"}
	for range 3 {
		rec, err := r.Submit(context.Background(), req)
		if err != nil || rec.Job.ID != id {
			t.Fatalf("submit: %v %s", err, rec.Job.ID)
		}
	}
	if n, _ := env.Backend.Inbox.Pending(context.Background(), tenant.ID{Project: "site", User: "alice"}); n != 1 {
		t.Fatalf("%d jobs queued; want 1", n)
	}
}
