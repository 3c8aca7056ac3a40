package awsq

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	qtypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/webordinary/webordinary/internal/broker"
)

// receiver runs the receives of one queue detached from its callers. An SQS long poll must
// never be cancelled: a cancelled ReceiveMessage can still take a message server-side and leave
// it invisible for the whole visibility timeout. So callers only wait for what the receiver's
// own poll brings; a poll runs to its end even when every caller left, and what it brings then
// is kept for the next caller (hold) or given back at once (ChangeMessageVisibility 0).
type receiver struct {
	a     *adapter
	queue string // queue name
	// max is the most messages one receive takes; visibility is their invisibility.
	max        int32
	visibility time.Duration
	// hold keeps a message that arrived with no caller waiting for the next caller; otherwise
	// it is given back at once so another process can have it.
	hold bool
	// empty, when set, is called after a receive that began at start brought nothing.
	empty func(start time.Time)

	mu      sync.Mutex
	ready   []received
	waiters int
	polling bool
	closed  bool
	wake    chan struct{} // closed and replaced when ready grows or the receiver closes
}

// received is a message and when it was received.
type received struct {
	msg qtypes.Message
	at  time.Time
}

func newReceiver(a *adapter, queue string, maxMessages int32, visibility time.Duration, hold bool) *receiver {
	return &receiver{a: a, queue: queue, max: maxMessages, visibility: visibility, hold: hold, wake: make(chan struct{})}
}

// next returns the next received message, waiting until ctx ends or, when wait ≥ 0, at most
// wait (then broker.ErrNoMessage).
func (r *receiver) next(ctx context.Context, wait time.Duration) (received, error) {
	var timeout <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		m, wake, err := r.take()
		if err != nil || m != nil {
			if m == nil {
				return received{}, err
			}
			return *m, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			r.leave()
			return received{}, ctx.Err()
		case <-timeout:
			r.leave()
			return received{}, broker.ErrNoMessage
		}
		r.leave()
	}
}

// take pops a ready message, or registers the caller as waiting (starting a poll if none runs)
// and returns the channel that signals a change.
func (r *receiver) take() (*received, <-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, errClosed
	}
	if len(r.ready) > 0 {
		m := r.ready[0]
		r.ready = r.ready[1:]
		return &m, nil, nil
	}
	r.waiters++
	if !r.polling {
		r.polling = true
		r.a.polls.Add(1)
		go r.poll()
	}
	return nil, r.wake, nil
}

func (r *receiver) leave() {
	r.mu.Lock()
	r.waiters--
	r.mu.Unlock()
}

// poll receives while someone waits. It runs on the adapter's background context, never on a
// caller's, and each receive is bounded by the poll wait plus a margin.
func (r *receiver) poll() {
	defer r.a.polls.Done()
	for {
		n, ok := r.wanted()
		if !ok {
			return
		}
		start := time.Now()
		msgs, err := r.receive(n)
		if err == nil && len(msgs) == 0 && r.empty != nil {
			r.empty(start)
		}
		if err != nil {
			r.a.cfg.Logger.Warn("awsq: receive failed; retrying", "queue", r.queue, "err", err)
			time.Sleep(time.Second)
			continue
		}
		r.deliver(msgs)
	}
}

// wanted says how many messages to ask for, or false (and marks the poll ended) when nobody
// waits or the receiver closed.
func (r *receiver) wanted() (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := r.waiters - len(r.ready) // a waiter about to take a ready message wants no more
	if want <= 0 || r.closed {
		r.polling = false
		return 0, false
	}
	return min(r.max, int32(want)), true
}

func (r *receiver) receive(n int32) ([]qtypes.Message, error) {
	ctx, cancel := context.WithTimeout(r.a.bg, r.a.cfg.PollWait+10*time.Second)
	defer cancel()
	url, err := r.a.queueURL(ctx, r.queue)
	if err != nil {
		return nil, err
	}
	out, err := r.a.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         n,
		WaitTimeSeconds:             int32(seconds(r.a.cfg.PollWait)),
		VisibilityTimeout:           int32(seconds(r.visibility)),
		MessageSystemAttributeNames: []qtypes.MessageSystemAttributeName{qtypes.MessageSystemAttributeNameApproximateReceiveCount, qtypes.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		if noSuchQueue(err) {
			r.a.forgetQueue(r.queue)
		}
		return nil, err
	}
	return out.Messages, nil
}

// deliver hands msgs to the waiting callers, or keeps or gives back what nobody wants.
func (r *receiver) deliver(msgs []qtypes.Message) {
	if len(msgs) == 0 {
		return
	}
	now := time.Now()
	r.mu.Lock()
	var back []qtypes.Message
	if r.closed || (!r.hold && r.waiters <= 0) {
		back = msgs
	} else {
		for _, m := range msgs {
			r.ready = append(r.ready, received{msg: m, at: now})
		}
		close(r.wake)
		r.wake = make(chan struct{})
	}
	r.mu.Unlock()
	r.giveBack(back)
}

// giveBack makes msgs visible again at once.
func (r *receiver) giveBack(msgs []qtypes.Message) {
	for _, m := range msgs {
		r.a.release(r.queue, aws.ToString(m.ReceiptHandle))
	}
}

// close stops the receiver: what it holds is given back, and so is whatever its outstanding
// poll still brings. Idempotent.
func (r *receiver) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	var back []qtypes.Message
	for _, m := range r.ready {
		back = append(back, m.msg)
	}
	r.ready = nil
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
	r.giveBack(back)
}

// fresh makes sure a message kept for a while is still invisible for its full visibility when
// handed out: false when it is no longer ours (its visibility ran out and it was received again).
func (r *receiver) fresh(ctx context.Context, m received) bool {
	if time.Since(m.at) < r.visibility/4 {
		return true
	}
	return r.a.setVisibility(ctx, r.queue, aws.ToString(m.msg.ReceiptHandle), r.visibility) == nil
}

// release makes the message of handle visible again at once; errors are only logged (a stale
// handle means someone else has it already).
func (a *adapter) release(queue, handle string) {
	ctx, cancel := context.WithTimeout(context.WithValue(a.bg, windDown{}, true), 10*time.Second)
	defer cancel()
	if err := a.setVisibility(ctx, queue, handle, 0); err != nil && !staleHandle(err) {
		a.cfg.Logger.Warn("awsq: give back a message", "queue", queue, "err", err)
	}
}

// setVisibility sets the visibility timeout of handle's message to d from now.
func (a *adapter) setVisibility(ctx context.Context, queue, handle string, d time.Duration) error {
	url, err := a.queueURL(ctx, queue)
	if err != nil {
		return err
	}
	_, err = a.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(url), ReceiptHandle: aws.String(handle), VisibilityTimeout: int32(seconds(d)),
	})
	return err
}

// deleteMessage removes handle's message.
func (a *adapter) deleteMessage(ctx context.Context, queue, handle string) error {
	url, err := a.queueURL(ctx, queue)
	if err != nil {
		return err
	}
	_, err = a.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(handle)})
	if err != nil && (staleHandle(err) || noSuchQueue(err)) {
		return nil
	}
	return err
}

// attempt is the message's ApproximateReceiveCount (1 on first delivery).
func attempt(m qtypes.Message) int {
	n := 0
	for _, c := range m.Attributes[string(qtypes.MessageSystemAttributeNameApproximateReceiveCount)] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return max(n, 1)
}
