package sesin_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/mail/auth"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/mail/outbox/ses"
	"github.com/webordinary/webordinary/internal/mail/sesin"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// fixture is the whole inbound path on the emulators: SES's bucket, topic and queue on fauxqs,
// the broker on awsq (fauxqs + dynalite), replies through aws-ses-v2-local. The test plays SES.
type fixture struct {
	t        *testing.T
	b        *broker.Backend
	s3       *s3.Client
	sns      *sns.Client
	sqs      *sqs.Client
	bucket   string
	topic    string
	queueURL string
	in       *inbound.Inbound
	hold     time.Duration // Config.Hold for run; a second when zero
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	cfg := awsqtest.Config(t, awsqtest.Options{})
	b := awsqtest.Open(t, cfg)
	ac := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	f := &fixture{t: t, b: b, bucket: cfg.Prefix + "-inbound",
		s3:  s3.NewFromConfig(ac, func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(cfg.S3Endpoint), true }),
		sns: sns.NewFromConfig(ac, func(o *sns.Options) { o.BaseEndpoint = aws.String(cfg.SQSEndpoint) }),
		sqs: sqs.NewFromConfig(ac, func(o *sqs.Options) { o.BaseEndpoint = aws.String(cfg.SQSEndpoint) })}
	f.plumb(ctx, cfg.Prefix)
	f.in = newInbound(t, b)
	return f
}

// plumb creates what deploy/aws creates for SES: bucket, topic, queue subscribed to the topic.
func (f *fixture) plumb(ctx context.Context, prefix string) {
	f.t.Helper()
	must(f.t, func() error { _, err := f.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &f.bucket}); return err }())
	topic, err := f.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(prefix + "-inbound")})
	must(f.t, err)
	q, err := f.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-inbound")})
	must(f.t, err)
	attrs, err := f.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
	must(f.t, err)
	_, err = f.sns.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(attrs.Attributes["QueueArn"])})
	must(f.t, err)
	f.topic, f.queueURL = *topic.TopicArn, *q.QueueUrl
}

func newInbound(t *testing.T, b *broker.Backend) *inbound.Inbound {
	t.Helper()
	ctx := context.Background()
	projects, err := project.Open(ctx, b)
	must(t, err)
	threads, err := project.OpenThreads(ctx, b)
	must(t, err)
	mailTable, err := b.Table(ctx, "mail")
	must(t, err)
	_, err = projects.Put(ctx, project.Project{ID: "site", RepoURL: "/nowhere", Agent: project.AgentSpec{Kind: "claude"},
		Senders: map[string]string{"alice@example.com": "alice"}})
	must(t, err)
	r, err := router.New(router.Config{Backend: b})
	must(t, err)
	var in *inbound.Inbound
	sesEndpoint := awstest.SES(t)
	sender, err := ses.New(ses.Config{Client: sesv2.NewFromConfig(aws.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}, func(o *sesv2.Options) { o.BaseEndpoint = aws.String(sesEndpoint) }),
		Sent: func(ctx context.Context, msg []byte, id string) error { return in.RecordSent(ctx, msg, id) }})
	must(t, err)
	ob, err := outbox.Open(outbox.Config{Dir: filepath.Join(t.TempDir(), "spool"), Sender: sender})
	must(t, err)
	octx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = ob.Run(octx) }()
	in, err = inbound.New(inbound.Config{Domains: []string{"edit.example.net"}, Secret: []byte("0123456789abcdef0123"),
		Auth: auth.Config{TrustedAuthServID: sesin.AuthServID}, Projects: projects, Threads: threads, Mail: mailTable,
		Jobs: b.Jobs, Router: r, Outbox: ob, Logger: testLogger(t)})
	must(t, err)
	return in
}

// run starts the consumer until the test ends.
func (f *fixture) run() {
	f.t.Helper()
	c, err := sesin.New(sesin.Config{SQS: f.sqs, S3: f.s3, QueueURL: f.queueURL, Handler: f.in.Handle,
		Hold: cmp.Or(f.hold, time.Second), PollWait: time.Second, Logger: testLogger(f.t)})
	must(f.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// sesMessage is one message as SES receives it: the headers SES prepends, then the sender's.
type sesMessage struct {
	id           string    // SES's message id (the S3 key)
	msgID        string    // the Message-ID
	at           time.Time // SES's receipt time
	sesAuth      string    // SES's Authentication-Results, prepended
	belowHeaders string    // headers the sender wrote (a forged Authentication-Results goes here)
	body         string
	verdicts     map[string]string // spam, virus, spf, dkim, dmarc; default PASS
}

const passAuth = "amazonses.com;\r\n spf=pass (spfCheck: domain of example.com designates 192.0.2.1 as permitted sender) client-ip=192.0.2.1; envelope-from=alice@example.com; helo=mail.example.com;\r\n dkim=pass header.i=@example.com;\r\n dmarc=pass header.from=example.com;"

const failAuth = "amazonses.com;\r\n spf=fail (spfCheck: domain of example.com does not designate 198.51.100.7 as permitted sender) client-ip=198.51.100.7; envelope-from=alice@example.com; helo=evil.example;\r\n dkim=fail header.i=@example.com;\r\n dmarc=fail header.from=example.com;"

func (m sesMessage) raw() string {
	return "Received: from mail.example.com by inbound-smtp.us-east-1.amazonaws.com with SMTP id " + m.id + "\r\n" +
		"X-SES-Spam-Verdict: PASS\r\nX-SES-Virus-Verdict: PASS\r\n" +
		"Authentication-Results: " + m.sesAuth + "\r\n" + m.belowHeaders +
		"From: Alice <alice@example.com>\r\nTo: edit@edit.example.net\r\nSubject: Header colour\r\n" +
		"Message-ID: <" + m.msgID + ">\r\nDate: " + m.at.Format(time.RFC1123Z) + "\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\n" + m.body + "\r\n"
}

func (m sesMessage) verdict(k string) map[string]string {
	if v, ok := m.verdicts[k]; ok {
		return map[string]string{"status": v}
	}
	return map[string]string{"status": "PASS"}
}

// store plays SES's S3 action: the raw message under mail/<id>.
func (f *fixture) store(m sesMessage) {
	f.t.Helper()
	_, err := f.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String("mail/" + m.id),
		Body: strings.NewReader(m.raw())})
	must(f.t, err)
}

// notify plays SES's notification to the topic.
func (f *fixture) notify(m sesMessage) {
	f.t.Helper()
	n := map[string]any{
		"notificationType": "Received",
		"receipt": map[string]any{
			"timestamp": m.at.UTC().Format(time.RFC3339Nano), "recipients": []string{"edit@edit.example.net"},
			"spamVerdict": m.verdict("spam"), "virusVerdict": m.verdict("virus"), "spfVerdict": m.verdict("spf"),
			"dkimVerdict": m.verdict("dkim"), "dmarcVerdict": m.verdict("dmarc"),
			"action": map[string]any{"type": "S3", "topicArn": f.topic, "bucketName": f.bucket, "objectKey": "mail/" + m.id},
		},
		"mail": map[string]any{"timestamp": m.at.UTC().Format(time.RFC3339Nano), "source": "alice@example.com",
			"messageId": m.id, "destination": []string{"edit@edit.example.net"}},
	}
	b, _ := json.Marshal(n)
	_, err := f.sns.Publish(context.Background(), &sns.PublishInput{TopicArn: &f.topic, Message: aws.String(string(b))})
	must(f.t, err)
}

// inFlight waits until n notifications are received and not yet handled (held back).
func (f *fixture) inFlight(n int) {
	f.t.Helper()
	want := fmt.Sprint(n)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		out, err := f.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &f.queueURL,
			AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessagesNotVisible"}})
		must(f.t, err)
		if out.Attributes["ApproximateNumberOfMessagesNotVisible"] == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.t.Fatalf("%d notifications were not received within a minute", n)
}

// drained waits until the queue holds no notification, visible or not.
func (f *fixture) drained() {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute) // generous: a loaded machine is slow to poll
	for time.Now().Before(deadline) {
		out, err := f.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &f.queueURL,
			AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
		must(f.t, err)
		if out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatal("the inbound queue did not drain within a minute")
}

func (f *fixture) pending() int {
	n, err := f.b.Inbox.Pending(context.Background(), tenant.ID{Project: "site", User: "alice"})
	must(f.t, err)
	return n
}

// TestAcceptedOnceWhenNotifiedTwice: a message SES accepted becomes one job, although its
// notification arrives twice (SNS and SQS deliver at least once).
func TestAcceptedOnceWhenNotifiedTwice(t *testing.T) {
	t.Parallel()
	f := setup(t)
	m := sesMessage{id: "ses-1", msgID: "m1@example.com", at: time.Now(), sesAuth: passAuth, body: "Make the header green."}
	f.store(m)
	f.notify(m)
	f.notify(m)
	f.run()
	f.drained()
	if n := f.pending(); n != 1 {
		t.Fatalf("%d jobs pending, want 1", n)
	}
}

// TestRefused: what SES's verdicts or its topmost Authentication-Results refuse never becomes
// a job, whatever the sender wrote further down.
func TestRefused(t *testing.T) {
	t.Parallel()
	gray := map[string]string{"spf": "GRAY", "dkim": "GRAY", "dmarc": "GRAY"}
	cases := []struct {
		name string
		m    sesMessage
	}{
		{"dmarc fail", sesMessage{sesAuth: failAuth, verdicts: map[string]string{"spf": "FAIL", "dkim": "FAIL", "dmarc": "FAIL"}}},
		// SES's header says fail; a forged amazonses.com header below it says pass. The
		// notification does not decide here (GRAY): the topmost-header rule does.
		{"forged header below the real one", sesMessage{sesAuth: failAuth, verdicts: gray,
			belowHeaders: "Authentication-Results: " + passAuth + "\r\n"}},
		{"virus", sesMessage{sesAuth: passAuth, verdicts: map[string]string{"virus": "FAIL"}}},
		{"spam", sesMessage{sesAuth: passAuth, verdicts: map[string]string{"spam": "FAIL"}}},
		// The header says pass but SES's notification says DKIM FAIL: one of them is not SES's.
		{"header and notification disagree", sesMessage{sesAuth: passAuth, verdicts: map[string]string{"dkim": "FAIL", "spf": "FAIL"}}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			m := c.m
			m.id, m.msgID, m.at, m.body = fmt.Sprint("ses-r", i), fmt.Sprint("r", i, "@example.com"), time.Now(), "Delete everything."
			f.store(m)
			f.notify(m)
			f.run()
			f.drained()
			if n := f.pending(); n != 0 {
				t.Fatalf("%d jobs pending, want 0", n)
			}
		})
	}
}

// TestOrderPerSender: two messages from one sender whose notifications arrive in the wrong
// order (within the hold) become jobs in SES receipt order. The hold is long enough that both
// notifications arrive within it on a loaded machine too.
func TestOrderPerSender(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.hold = 10 * time.Second
	first := sesMessage{id: "ses-o1", msgID: "o1@example.com", sesAuth: passAuth, body: "First: make it green."}
	second := sesMessage{id: "ses-o2", msgID: "o2@example.com", sesAuth: passAuth, body: "Second: make it bold."}
	f.store(first)
	f.store(second)
	f.run()
	// SES receives both now; the hold runs from here, so the set-up's time on a loaded
	// machine does not count against it.
	first.at = time.Now()
	second.at = first.at.Add(100 * time.Millisecond)
	f.notify(second)
	f.inFlight(1) // the later message's notification is seen alone first, and held
	f.notify(first)
	if waited := time.Since(first.at); waited >= f.hold {
		t.Fatalf("both notifications took %s to reach the queue, longer than the hold %s the test relies on", waited, f.hold)
	}
	f.drained()
	q, err := f.b.Inbox.Open(context.Background(), tenant.ID{Project: "site", User: "alice"}, broker.QueueOptions{})
	must(t, err)
	defer q.Close(context.Background())
	for _, want := range []string{"First", "Second"} {
		d, err := q.Next(context.Background(), 5*time.Second)
		must(t, err)
		if !strings.HasPrefix(jobspec.Of(d.Job()).Instruction, want) {
			t.Fatalf("job %q came before %q", jobspec.Of(d.Job()).Instruction, want)
		}
		must(t, d.Ack(context.Background()))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
