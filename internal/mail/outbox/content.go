package outbox

import (
	"fmt"
	"regexp"
	"strings"
)

// block is one piece of a reply's body, rendered once as text and once as HTML, so the copy
// lives in one place.
type block struct {
	Kind   string // "p", "list", "pre", "buttons" or "images"
	Title  string // heading of a list or pre block
	Text   string // paragraph or preformatted text
	Items  []string
	Links  []link
	Images []Image // Kind "images"
}

// link is a labelled URL.
type link struct{ Label, URL string }

// Lines splits a paragraph into its lines (for <br> in HTML).
func (b block) Lines() []string { return strings.Split(b.Text, "\n") }

func para(format string, args ...any) block {
	return block{Kind: "p", Text: fmt.Sprintf(format, args...)}
}

// content is the body of a reply: its blocks and a closing line.
type content struct {
	Blocks []block
	Footer string
}

// images are the pictures the content shows: the only ones the message carries.
func (c content) images() []Image {
	var out []Image
	for _, b := range c.Blocks {
		out = append(out, b.Images...)
	}
	return out
}

// add appends b unless it is empty.
func (c *content) add(b block) {
	if strings.TrimSpace(b.Text) != "" || len(b.Items) > 0 || len(b.Links) > 0 || len(b.Images) > 0 {
		c.Blocks = append(c.Blocks, b)
	}
}

// addPara appends a paragraph "prefix text" when text is not empty.
func (c *content) addPara(prefix, text string) {
	if text = strings.TrimSpace(text); text != "" {
		c.add(para("%s%s", prefix, text))
	}
}

const (
	footerReply = "Reply to this email to make more changes. — webordinary"
	footerAuto  = "This is an automatic reply from webordinary."
)

// bodyOf returns the copy for the reply's kind.
func bodyOf(r Reply) content {
	c := kindBody(r)
	if r.Understood != "" && r.Kind != Refused && r.Kind != Held && r.Kind != Waiting {
		c.add(understood(r))
	}
	if r.ThreadURL != "" && r.Kind != Refused && r.Kind != Held {
		c.add(block{Kind: "buttons", Links: []link{{"Everything about this request", r.ThreadURL}}})
	}
	return c
}

// understood quotes the instruction back as it was read.
func understood(r Reply) block {
	title := "I read your request as"
	if r.Guessed {
		title = "I wasn't sure which part of your email was new, so I read your request as"
	}
	return block{Kind: "pre", Title: title, Text: r.Understood}
}

// kindBody returns the copy particular to the reply's kind.
func kindBody(r Reply) content {
	switch r.Kind {
	case Done:
		return doneBody(r)
	case Failed:
		return failedBody(r)
	case Interrupted:
		return interruptedBody(r)
	case Dead:
		return deadBody(r)
	case Refused:
		return refusedBody(r)
	case Held:
		return heldBody(r)
	case Published:
		return publishedBody(r)
	case Waiting:
		return waitingBody(r)
	default:
		return receivedBody(r)
	}
}

// doneBody is made for a phone: what changed, a big preview button, one picture, then how
// to publish. Paths, diffs, branches, commits, costs and durations are for the operator's job
// page, not the owner's mail.
func doneBody(r Reply) content {
	c := content{Footer: footerReply}
	if r.NoChanges {
		c.add(para("I looked into your request, but I didn't change anything on the site."))
		c.addPara("", ownerText(r.Summary))
		c.add(para("If something should change, reply and tell me a little more about what you'd like."))
		return c
	}
	c.add(para("Your change is ready to look at."))
	if r.Continued > 0 {
		c.add(para("Your earlier message on this thread, which this one interrupted, was taken into account too."))
	}
	c.addPara("", ownerText(r.Summary))
	c.add(block{Kind: "list", Title: "I left these out of what I saved", Items: r.LeftOut})
	c.add(block{Kind: "buttons", Links: previewButton(r.PreviewURLs)})
	c.add(block{Kind: "images", Images: onePicture(r.Images)})
	if r.Publishable {
		c.add(para("Happy with it? Reply \"publish\" to make it live."))
		c.add(block{Kind: "buttons", Links: publishLink(r.PublishURL)})
	}
	c.add(para("Not quite right? Reply and say what to change."))
	return c
}

// previewButton is the thread's own preview: the one link the owner needs.
func previewButton(urls []string) []link {
	if len(urls) == 0 {
		return nil
	}
	return []link{{"See the preview", urls[0]}}
}

// onePicture picks the picture the reply shows: the first page's phone picture, else the
// first picture.
func onePicture(images []Image) []Image {
	for _, im := range images {
		if im.Screen == "phone" {
			return []Image{im}
		}
	}
	if len(images) > 0 {
		return images[:1]
	}
	return nil
}

// processNoise matches lines of an agent's text that are tool output rather than words for
// the owner: exit statuses, sandbox and npm errors, stack traces.
var processNoise = regexp.MustCompile(`(?i)exit(ed)? (with )?(code|status)|bwrap:|npm (err|error)|traceback|^\s*at \S+ \(|command not found|permission denied|^\s*(\$|#) `)

// leftOutLine starts the summary's line naming what was left out of the commit: the reply
// lists Reply.LeftOut on its own instead.
const leftOutLine = "Left out of the commit: "

// maxOwnerText bounds the agent's text in a reply.
const maxOwnerText = 700

// ownerText is the agent's account of its work as the owner reads it: tool output left out,
// and at most a few paragraphs.
func ownerText(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !processNoise.MatchString(l) && !strings.HasPrefix(l, leftOutLine) {
			keep = append(keep, l)
		}
	}
	s = strings.TrimSpace(strings.Join(keep, "\n"))
	if len(s) <= maxOwnerText {
		return s
	}
	cut := strings.LastIndex(s[:maxOwnerText], "\n\n")
	if cut < maxOwnerText/3 {
		cut = strings.LastIndexAny(s[:maxOwnerText], ".!?") + 1
	}
	if cut <= 0 {
		cut = maxOwnerText
	}
	return strings.TrimSpace(s[:cut]) + " …"
}

func publishLink(url string) []link {
	if url == "" {
		return nil
	}
	return []link{{"Publish now", url}}
}

// publishedBody: the summary says what went live (or was taken back) and where.
func publishedBody(r Reply) content {
	c := content{Footer: "Reply \"undo\" to this email to take the last publish back. — webordinary"}
	if r.Undone {
		c.Footer = footerReply
	}
	c.addPara("", r.Summary)
	if r.LiveURL != "" {
		c.add(block{Kind: "buttons", Links: []link{{"See the live site", r.LiveURL}}})
	}
	return c
}

func failedBody(r Reply) content {
	c := content{Footer: "Reply to this email to try again. — webordinary"}
	a := adviceFor(r)
	c.add(para("Sorry, I couldn't finish this edit."))
	c.add(para("%s", a.what))
	if r.Problem.Operators() {
		c.add(para("%s", operatorTold))
	}
	c.addPara("What to do: ", a.todo)
	return c
}

// interruptedBody says who stopped the job and whether anything it did was saved: only a
// commit means saved work.
func interruptedBody(r Reply) content {
	c := content{Footer: footerAuto}
	if r.Superseded {
		c.add(para("Your newer message on this thread took over, so I stopped working on this one."))
	} else {
		c.add(para("This edit was stopped before it finished."))
	}
	switch {
	case r.Commit == "":
		c.add(para("I hadn't changed anything yet, so nothing was saved from it."))
	case r.Superseded:
		c.add(para("What I had done so far was saved; your newer message picks up from there, and I'll reply to it when it's done."))
	default:
		c.add(para("What I had done so far was saved."))
	}
	return c
}

func deadBody(r Reply) content {
	c := content{Footer: "Reply to this email to try again. — webordinary"}
	a := adviceFor(r)
	c.add(para("Sorry, I made %s and it kept failing, so I've stopped trying.", attempts(r.Attempts)))
	c.add(para("%s", a.what))
	c.add(para("%s", operatorTold))
	c.addPara("What to do: ", a.todo)
	return c
}

func refusedBody(r Reply) content {
	c := content{Footer: footerAuto}
	c.add(para("I didn't act on your message."))
	c.addPara("Why: ", r.Error)
	c.addPara("What to do: ", r.Hint)
	return c
}

// heldBody lists the messages held and says that nothing is lost.
func heldBody(r Reply) content {
	c := content{Footer: footerAuto}
	c.add(para("Many instructions arrived from you in a short time, so I've held %s instead of acting on %s right away:",
		plural(len(r.HeldMessages), "message"), pronoun(len(r.HeldMessages))))
	c.add(block{Kind: "list", Items: r.HeldMessages})
	c.add(para("Nothing is lost: the site's operator has been told and can let them through. You don't need to send them again."))
	if !r.HeldUntil.IsZero() {
		c.add(para("Anything else you send before %s will be held too; after that I'll act on new messages as usual.",
			r.HeldUntil.UTC().Format("15:04 MST")))
	}
	return c
}

// plural is "1 message" or "n messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// waitingBody is the one short note a job that waits long gets: why, and that nothing needs
// doing.
func waitingBody(r Reply) content {
	c := content{Footer: footerAuto}
	switch {
	case r.ModelBusy:
		c.add(para("Still on it: the AI service I use is busy right now, so your change is taking longer than usual."))
	case r.Retrying:
		c.add(para("Still on it: my first try hit a snag, so I'm trying again. Your change is taking longer than usual."))
	case r.Behind:
		c.add(para("Still on it: I'm finishing your earlier requests first, so this one is taking longer than usual."))
	default:
		c.add(para("Still on it: I'm busy with other work right now, so your change is taking longer than usual."))
	}
	c.add(para("I'll reply here when it's done. You don't need to send anything again."))
	return c
}

func receivedBody(r Reply) content {
	c := content{Footer: footerAuto}
	c.add(para("Got it! I'm working on your edit and will reply here when it's done."))
	return c
}

func attempts(n int) string {
	switch {
	case n <= 0:
		return "several attempts"
	case n == 1:
		return "1 attempt"
	default:
		return fmt.Sprintf("%d attempts", n)
	}
}

// OwnerText is the agent's account of its work as an owner may read it anywhere (the thread
// page too): process output left out, at most a few paragraphs.
func OwnerText(s string) string { return ownerText(s) }
