package inbound

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/mail/outbox"
)

// DefaultWaitNoteAfter is Config.WaitNoteAfter's default.
const DefaultWaitNoteAfter = time.Minute

// waitScan is how many of the newest jobs NoteWaits looks at: those waiting are among them.
const waitScan = 200

// NoteWaits sends the still-on-it notes that are due (see Config.WaitNoteAfter) and returns
// how many it sent. Each job gets at most one, whatever the number of mail routers and
// restarts: the Mail table records it before it is sent. Run calls it on a ticker.
func (in *Inbound) NoteWaits(ctx context.Context) (int, error) {
	if in.cfg.Outbox == nil || in.cfg.Jobs == nil || in.cfg.WaitNoteAfter <= 0 {
		return 0, nil
	}
	recs, err := in.cfg.Jobs.Recent(ctx, waitScan)
	if err != nil {
		return 0, err
	}
	now, sent := in.cfg.Now(), 0
	var errs []error
	for i, rec := range recs {
		busy, due := in.waitDue(rec, now)
		if !due {
			continue
		}
		ok, err := in.noteWait(ctx, rec, busy, behind(rec, recs[i+1:]))
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			sent++
		}
	}
	return sent, errors.Join(errs...)
}

// waitDue reports whether rec's sender is due a note, and whether the job waits for a busy
// model service rather than for earlier work.
func (in *Inbound) waitDue(rec broker.JobRecord, now time.Time) (busy, due bool) {
	after := in.cfg.WaitNoteAfter
	switch {
	case jobspec.Of(rec.Job).From == "" || rec.State.Final():
		return false, false
	case !rec.BusySince.IsZero():
		return true, now.Sub(rec.BusySince) >= after
	case rec.State == broker.StateQueued || rec.State == broker.StateClaimed:
		return false, !rec.Job.AcceptedAt.IsZero() && now.Sub(rec.Job.AcceptedAt) >= after
	}
	return false, false
}

// behind reports whether an older job of rec's tenant (older: among recs, newest first) has
// not ended: rec waits for it.
func behind(rec broker.JobRecord, older []broker.JobRecord) bool {
	for _, o := range older {
		if o.Job.Tenant == rec.Job.Tenant && !o.State.Final() {
			return true
		}
	}
	return false
}

// noteWait records rec's note in the Mail table, then sends it; false when it was recorded
// before (sent already, or being sent by another mail router).
func (in *Inbound) noteWait(ctx context.Context, rec broker.JobRecord, busy, behind bool) (bool, error) {
	key := "w" + rec.Job.ID
	if _, err := in.cfg.Mail.Create(ctx, key, []byte(rec.Job.ID)); errors.Is(err, broker.ErrExists) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	rep := in.baseReply(rec.Job, outbox.Waiting)
	rep.ModelBusy, rep.Retrying = busy, !busy && rec.Failures > 0
	rep.Behind = !busy && !rep.Retrying && behind
	if err := in.send(ctx, rep); err != nil {
		_ = in.cfg.Mail.Delete(context.WithoutCancel(ctx), key) // try again at the next pass
		return false, err
	}
	in.cfg.Logger.InfoContext(ctx, "told the owner their job is still waiting", slog.String("job", rec.Job.ID),
		slog.Bool("modelBusy", busy), slog.String("state", string(rec.State)))
	return true, nil
}
