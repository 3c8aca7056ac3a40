package shots

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// errClosed means the browser's end of the pipe is gone: it exited or crashed.
var errClosed = errors.New("browser connection closed")

// conn speaks the Chrome DevTools Protocol over --remote-debugging-pipe: JSON messages ended
// by a NUL byte, commands written to the browser's fd 3, replies and events read from its
// fd 4. No socket is involved, so the browser needs no network at all, not even loopback.
// Sessions are flat (Target.attachToTarget with flatten): a command for a page carries its
// sessionId. Safe for concurrent use.
type conn struct {
	w io.WriteCloser

	wmu sync.Mutex // serializes writes

	mu       sync.Mutex
	next     int64
	pending  map[int64]chan reply
	sessions map[string]func(event) // event handlers by session; called on the read loop
	err      error                  // set once the read loop ends
	done     chan struct{}
}

// message is anything the browser sends: a reply (ID set) or an event (Method set).
type message struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdpError       `json:"error,omitempty"`
}

type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *cdpError) Error() string { return fmt.Sprintf("cdp error %d: %s", e.Code, e.Message) }

type reply struct {
	result json.RawMessage
	err    error
}

// event is one event of a session.
type event struct {
	Method string
	Params json.RawMessage
}

// newConn starts reading r; it writes commands to w.
func newConn(r io.Reader, w io.WriteCloser) *conn {
	c := &conn{w: w, pending: map[int64]chan reply{}, sessions: map[string]func(event){}, done: make(chan struct{})}
	go c.read(bufio.NewReaderSize(r, 1<<20))
	return c
}

// read dispatches messages until the pipe ends, then fails every pending call.
func (c *conn) read(r *bufio.Reader) {
	var err error
	for err == nil {
		var raw []byte
		if raw, err = r.ReadBytes(0); err == nil {
			err = c.dispatch(raw[:len(raw)-1])
		}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %v", errClosed, err)
	for id, ch := range c.pending {
		ch <- reply{err: c.err}
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *conn) dispatch(raw []byte) error {
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("bad message from the browser: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.ID != 0 {
		if ch, ok := c.pending[m.ID]; ok {
			delete(c.pending, m.ID)
			if m.Error != nil {
				ch <- reply{err: m.Error}
			} else {
				ch <- reply{result: m.Result}
			}
		}
		return nil
	}
	if h := c.sessions[m.SessionID]; h != nil {
		h(event{Method: m.Method, Params: m.Params})
	}
	return nil
}

// call sends method to the browser (session "") or a page's session and decodes the result
// into out (nil: ignored). It returns when the reply arrives, ctx ends (the reply is then
// dropped) or the browser is gone.
func (c *conn) call(ctx context.Context, session, method string, params, out any) error {
	ch, id, err := c.send(session, method, params)
	if err != nil {
		return err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return fmt.Errorf("%s: %w", method, r.err)
		}
		if out != nil {
			return json.Unmarshal(r.result, out)
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return ctx.Err()
	}
}

func (c *conn) send(session, method string, params any) (chan reply, int64, error) {
	if params == nil {
		params = struct{}{}
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, 0, c.err
	}
	c.next++
	id := c.next
	ch := make(chan reply, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	b, err := json.Marshal(struct {
		ID        int64  `json:"id"`
		SessionID string `json:"sessionId,omitempty"`
		Method    string `json:"method"`
		Params    any    `json:"params"`
	}{id, session, method, params})
	if err == nil {
		c.wmu.Lock()
		_, err = c.w.Write(append(b, 0))
		c.wmu.Unlock()
	}
	if err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, 0, fmt.Errorf("%w: %v", errClosed, err)
	}
	return ch, id, nil
}

// subscribe routes the events of session to h, which runs on the read loop and must not
// block; nil unsubscribes.
func (c *conn) subscribe(session string, h func(event)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h == nil {
		delete(c.sessions, session)
		return
	}
	c.sessions[session] = h
}

// close closes the command pipe; the browser exits when it reads its end.
func (c *conn) close() error { return c.w.Close() }
