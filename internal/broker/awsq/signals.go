package awsq

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// signals routes interrupts to the owning process: each backend instance has its own standard
// queue "<prefix>-sig-<process>", long-polled while it watches any tenant; Watch records a route
// (routes table: pk = tenant → queue URL and watcher id); Interrupt reads the route and sends to
// that queue. Best effort: a missing route or queue drops the signal.
type signals struct {
	a *adapter
	r *receiver

	mu       sync.Mutex
	watchers map[tenant.ID]*watcher
	running  bool
}

type watcher struct {
	id string
	ch chan broker.Interrupt
}

// signalBody is an interrupt's message.
type signalBody struct {
	Tenant    string           `json:"t"`
	Interrupt broker.Interrupt `json:"in"`
}

var _ broker.Signals = (*signals)(nil)

func newSignals(a *adapter) *signals {
	s := &signals{a: a, watchers: map[tenant.ID]*watcher{}}
	s.r = newReceiver(a, a.names.signalQueue(a.process), 10, 30*time.Second, true)
	a.register(s.r)
	return s
}

func (s *signals) Interrupt(ctx context.Context, t tenant.ID, in broker.Interrupt) error {
	it, err := s.a.getItem(ctx, s.a.names.routes, key(t.String(), noSK))
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: interrupt %s: %w", t, err))
	}
	if it == nil {
		return ctx.Err()
	}
	body, _ := json.Marshal(signalBody{Tenant: t.String(), Interrupt: in})
	_, err = s.a.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(getS(it, "url")), MessageBody: aws.String(string(body))})
	if err != nil && !noSuchQueue(err) {
		return ctxErr(ctx, fmt.Errorf("awsq: interrupt %s: %w", t, err))
	}
	return ctx.Err()
}

func (s *signals) Watch(ctx context.Context, t tenant.ID) (<-chan broker.Interrupt, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	url, err := s.a.queueURL(ctx, s.r.queue)
	if err != nil {
		return nil, nil, ctxErr(ctx, err)
	}
	w := &watcher{id: randomID(), ch: make(chan broker.Interrupt, 16)}
	it := key(t.String(), noSK)
	it["url"], it["watcher"] = str(url), str(w.id)
	if _, err := s.a.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.a.names.routes), Item: it}); err != nil {
		return nil, nil, ctxErr(ctx, fmt.Errorf("awsq: watch %s: %w", t, err))
	}
	s.add(t, w)
	return w.ch, sync.OnceFunc(func() { s.stop(t, w) }), nil
}

// add registers w and starts the dispatcher if it is not running.
func (s *signals) add(t tenant.ID, w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.watchers[t]; old != nil {
		close(old.ch)
	}
	s.watchers[t] = w
	if !s.running {
		s.running = true
		go s.dispatch()
	}
}

// stop unregisters w, closes its channel and deletes its route (only if it is still w's).
func (s *signals) stop(t tenant.ID, w *watcher) {
	s.mu.Lock()
	if s.watchers[t] == w {
		delete(s.watchers, t)
		close(w.ch)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.a.bg, 10*time.Second)
	defer cancel()
	_, _ = s.a.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.a.names.routes), Key: key(t.String(), noSK),
		ConditionExpression:       aws.String("watcher = :w"),
		ExpressionAttributeValues: item{":w": str(w.id)},
	})
}

// dispatch receives from the process's signal queue while any tenant is watched, deleting each
// signal and passing it to its watcher (dropped when nobody watches or the watcher is full).
func (s *signals) dispatch() {
	for {
		m, err := s.r.next(s.a.bg, s.a.cfg.PollWait)
		if !s.watching() {
			if err == nil {
				s.a.release(s.r.queue, aws.ToString(m.msg.ReceiptHandle))
			}
			return
		}
		if err == broker.ErrNoMessage {
			continue
		}
		if err != nil {
			return // closed
		}
		ctx, cancel := context.WithTimeout(s.a.bg, 10*time.Second)
		_ = s.a.deleteMessage(ctx, s.r.queue, aws.ToString(m.msg.ReceiptHandle))
		cancel()
		s.pass(aws.ToString(m.msg.Body))
	}
}

// watching reports whether any tenant is watched; false also marks the dispatcher stopped.
func (s *signals) watching() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.watchers) == 0 {
		s.running = false
		return false
	}
	return true
}

func (s *signals) pass(body string) {
	var b signalBody
	if json.Unmarshal([]byte(body), &b) != nil {
		return
	}
	t, err := tenant.Parse(b.Tenant)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.watchers[t]; w != nil {
		select {
		case w.ch <- b.Interrupt:
		default:
		}
	}
}
