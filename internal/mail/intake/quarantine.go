package intake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/durable"
	"github.com/webordinary/webordinary/internal/metrics"
)

// ErrQuarantine, wrapped by a Handler's error, says the message will fail the same way every
// time (unparseable, over the parse budget): it is set aside in the quarantine instead of being
// retried, and the messages after it go on. An operator can release it (after raising a limit)
// or delete it.
var ErrQuarantine = errors.New("message set aside")

// ErrNotQuarantined is returned by Release and Delete for an id not in the quarantine.
var ErrNotQuarantined = errors.New("no such quarantined message")

// Quarantined describes a message set aside: quarantined, or held (QuarantinedAt is then
// when it was held).
type Quarantined struct {
	ID            string    `json:"id"`
	ReceivedAt    time.Time `json:"receivedAt"`
	QuarantinedAt time.Time `json:"quarantinedAt"`
	MailFrom      string    `json:"mailFrom"`
	Rcpt          []string  `json:"rcpt"`
	Size          int64     `json:"size"`
	Reason        string    `json:"reason"`
	// From and Subject are the message's headers, when they could be read.
	From    string `json:"from,omitempty"`
	Subject string `json:"subject,omitempty"`
}

// quarantineDir is the spool's subdirectory of messages set aside: <id>.eml, <id>.json and
// <id>.reason.
const quarantineDir = "bad"

// spoolID is the form of every spool id (see nextID); anything else is refused as an id.
var spoolID = regexp.MustCompile(`^[0-9]{19}-[0-9]{6}-[0-9a-f]{8}$`)

// setAside quarantines a spooled message and counts it; false when it could not be moved (it
// then holds back the later ones, as any failure does).
func (s *Server) setAside(ctx context.Context, id, kind, reason string) bool {
	if err := s.spool.quarantine(id, reason); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "quarantine mail", slog.String("spool", id), slog.Any("err", err))
		return false
	}
	metrics.MailQuarantined.WithLabelValues(kind).Inc()
	s.cfg.Logger.WarnContext(ctx, "mail quarantined", slog.String("spool", id), slog.String("reason", reason))
	return true
}

// Quarantined lists the messages set aside, oldest first. Safe for concurrent use.
func (s *Server) Quarantined() ([]Quarantined, error) { return s.spool.quarantined() }

// Release puts a quarantined message back in the spool, in its place by arrival, and wakes the
// handling loop: it is handled again (with the limits in force now).
func (s *Server) Release(id string) error {
	if err := s.spool.release(id); err != nil {
		return err
	}
	s.accepted()
	return nil
}

// Delete removes a quarantined message for good.
func (s *Server) Delete(id string) error { return s.spool.deleteQuarantined(id) }

// quarantine moves an entry to bad/ with the reason it was set aside.
func (s *spool) quarantine(id, reason string) error { return s.shelve(quarantineDir, id, reason) }

// shelve moves an entry to the shelf (a subdirectory) with the reason it was set aside. The
// body moves last, so a crash in between leaves the envelope behind, which pending does not
// list.
func (s *spool) shelve(shelf, id, reason string) error {
	bad := filepath.Join(s.dir, shelf)
	if err := os.MkdirAll(bad, 0o700); err != nil {
		return err
	}
	if err := durable.WriteFile(bad, id+".reason", []byte(reason)); err != nil {
		return err
	}
	if err := s.move(s.dir, bad, id); err != nil {
		return err
	}
	return durable.SyncDir(s.dir)
}

// release moves a quarantined entry back.
func (s *spool) release(id string) error {
	return s.unshelve(quarantineDir, id, ErrNotQuarantined, nil)
}

// unshelve moves a shelved entry back, after edit (when set) changed its envelope; the reason
// goes last, so a crash in between leaves the message in the spool (handled again) rather than
// lost.
func (s *spool) unshelve(shelf, id string, notFound error, edit func(*Envelope)) error {
	bad, err := s.shelfPath(shelf, id, notFound)
	if err != nil {
		return err
	}
	if edit != nil {
		if err := editEnvelope(bad, id, edit); err != nil {
			return err
		}
	}
	if err := s.move(bad, s.dir, id); err != nil {
		return err
	}
	if err := durable.SyncDir(s.dir); err != nil {
		return err
	}
	return durable.Remove(bad, id+".reason")
}

// deleteQuarantined removes a quarantined entry's files.
func (s *spool) deleteQuarantined(id string) error {
	return s.deleteShelved(quarantineDir, id, ErrNotQuarantined)
}

// deleteShelved removes a shelved entry's files.
func (s *spool) deleteShelved(shelf, id string, notFound error) error {
	bad, err := s.shelfPath(shelf, id, notFound)
	if err != nil {
		return err
	}
	for _, ext := range []string{".eml", ".json", ".reason"} {
		if err := os.Remove(filepath.Join(bad, id+ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return durable.SyncDir(bad)
}

// shelfPath checks that id is a message on the shelf and returns the shelf's directory.
func (s *spool) shelfPath(shelf, id string, notFound error) (string, error) {
	bad := filepath.Join(s.dir, shelf)
	if !spoolID.MatchString(id) {
		return bad, fmt.Errorf("%w: %q", notFound, id)
	}
	if _, err := os.Stat(filepath.Join(bad, id+".eml")); err != nil {
		return bad, fmt.Errorf("%w: %s", notFound, id)
	}
	return bad, nil
}

// editEnvelope rewrites id's envelope in dir (durably).
func editEnvelope(dir, id string, edit func(*Envelope)) error {
	var env Envelope
	meta, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(meta, &env); err != nil {
		return fmt.Errorf("intake: envelope %s: %w", id, err)
	}
	edit(&env)
	meta, _ = json.Marshal(env)
	if err := durable.Write(dir, id+".json", meta); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}

// move renames id's envelope, then its body, from one directory to another.
func (s *spool) move(from, to, id string) error {
	for _, ext := range []string{".json", ".eml"} {
		err := os.Rename(filepath.Join(from, id+ext), filepath.Join(to, id+ext))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return durable.SyncDir(to)
}

// quarantined lists bad/, oldest first.
func (s *spool) quarantined() ([]Quarantined, error) { return s.shelved(quarantineDir) }

// shelved lists a shelf, oldest first; an entry whose envelope is unreadable is listed with
// what is known.
func (s *spool) shelved(shelf string) ([]Quarantined, error) {
	bad := filepath.Join(s.dir, shelf)
	entries, err := os.ReadDir(bad)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Quarantined
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".eml"); ok && spoolID.MatchString(id) {
			out = append(out, describeQuarantined(bad, id))
		}
	}
	slices.SortFunc(out, func(a, b Quarantined) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func describeQuarantined(bad, id string) Quarantined {
	q := Quarantined{ID: id, Reason: "unknown (no reason recorded)"}
	if fi, err := os.Stat(filepath.Join(bad, id+".eml")); err == nil {
		q.Size = fi.Size()
	}
	if reason, err := os.ReadFile(filepath.Join(bad, id+".reason")); err == nil {
		q.Reason = string(reason)
		if fi, err := os.Stat(filepath.Join(bad, id+".reason")); err == nil {
			q.QuarantinedAt = fi.ModTime().UTC()
		}
	}
	var env Envelope
	if meta, err := os.ReadFile(filepath.Join(bad, id+".json")); err == nil && json.Unmarshal(meta, &env) == nil {
		q.ReceivedAt, q.MailFrom, q.Rcpt = env.ReceivedAt, env.MailFrom, env.Rcpt
	}
	q.From, q.Subject = headersOf(filepath.Join(bad, id+".eml"))
	return q
}

// headersOf reads the From and Subject of a spooled message (its first 64 KiB), for listings.
func headersOf(path string) (from, subject string) {
	f, err := os.Open(path)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	m, err := mail.ReadMessage(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", ""
	}
	dec := new(mime.WordDecoder)
	subject, err = dec.DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		subject = m.Header.Get("Subject")
	}
	if a, err := mail.ParseAddress(m.Header.Get("From")); err == nil {
		from = a.Address
	}
	return from, subject
}
