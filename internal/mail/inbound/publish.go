package inbound

import (
	"context"
	"regexp"
	"strings"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/pipeline/report"
)

// The whole new text of a message, lowercased, decides whether it asks to publish or to undo
// the last publish; anything more ("publish the new prices page") is an edit.
var (
	publishWords = regexp.MustCompile(`^(?:(?:it |that |this |all )?(?:looks?|is|seems) (?:good|great|fine|perfect|right)[,.!;:]*\s*)?` +
		`(?:(?:please|ok|okay|great|thanks|thank you|yes|perfect|lovely)[,.!;:]*\s*)*` +
		`(?:(?:please )?(?:publish|go live|make it live|put it live|push it live|ship it|launch)(?: it| this| that| the changes| them)?(?: live)?)` +
		`(?:[,.!;:]*\s*(?:please|now|thanks|thank you))*[.!]*$`)
	undoWords = regexp.MustCompile(`^(?:please )?(?:undo|revert|roll ?back|unpublish|take it down)` +
		`(?: (?:it|that|this|the (?:last )?publish|the changes|the last change))?(?:[,.!;:]*\s*(?:please|now|thanks))*[.!]*$`)
	spaces = regexp.MustCompile(`\s+`)
)

// actionOf returns jobspec.ActionPublish, jobspec.ActionUndo or jobspec.ActionEdit for an
// instruction.
func actionOf(instruction string) string {
	text := strings.TrimSpace(spaces.ReplaceAllString(strings.ToLower(instruction), " "))
	switch {
	case publishWords.MatchString(text):
		return jobspec.ActionPublish
	case undoWords.MatchString(text):
		return jobspec.ActionUndo
	}
	return jobspec.ActionEdit
}

// liveAction sets r.Publish for a message asking to publish or undo, and refuses one that
// does not reply on an existing conversation: only the thread's owner (the resolution
// checked it) publishes that thread's changes.
func liveAction(r *Report) (Decision, bool) {
	r.Publish = actionOf(r.Instruction)
	if r.Publish == jobspec.ActionEdit || !r.Thread.New {
		return Decision{}, false
	}
	r.Publish = jobspec.ActionEdit
	return Decision{Action: "refuse", Reply: true, Reason: "to publish (or undo a publish), reply to the email about the " +
		"changes you want to put live; this message does not belong to a conversation about changes"}, true
}

// fillPublish makes a live publish or undo a Published reply, and offers a done edit with a
// commit for publishing: by replying "publish", or by the signed link (when links are on).
func (in *Inbound) fillPublish(ctx context.Context, rep *outbox.Reply, res broker.Result, rec broker.JobRecord) {
	if res.State != broker.StateDone {
		return
	}
	d := report.Of(res)
	if d.LiveURL != "" {
		rep.Kind, rep.LiveURL, rep.Undone = outbox.Published, d.LiveURL, jobspec.Of(rec.Job).Action == jobspec.ActionUndo
		rep.MessageID = "" // derived again from the job and the new kind
		return
	}
	if jobspec.Of(rec.Job).Action == jobspec.ActionEdit && d.Commit != "" {
		rep.Publishable = true
		rep.PublishURL = in.publishURL(ctx, rec.Job)
	}
}
