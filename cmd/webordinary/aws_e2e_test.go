package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/mail"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webordinary/webordinary/internal/awssetup"
	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
)

// TestAWSEndToEnd runs the product on AWS's services (emulated): serve with the aws:// engine,
// SES inbound, SES replies and S3 previews, and a separate worker process on the same engine
// and bucket. The test plays SES's part: it stores the raw mail in the inbound bucket and
// publishes the receipt notification to the inbound topic (SNS → SQS). The instruction becomes
// a job the worker runs; the preview is deployed to S3 and served by serve's preview server
// from there; the reply reaches aws-ses-v2-local's store with the preview link.
func TestAWSEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve and a worker on the AWS emulators (~20s)")
	}
	t.Parallel()
	e := newAWSEnv(t)
	dir := reachableTempDir(t)
	origin := bareSite(t, dir)
	ready := filepath.Join(dir, "ready.json")
	previewPort := freePort(t)
	c := &cluster{t: t, dir: dir, engine: e.engineURL}
	awsFlags := []string{"--set", "aws.region=us-east-1", "--set", "aws.endpoint=" + e.fauxqs, "--set", "aws.ses_endpoint=" + e.ses,
		"--set", "worker.preview_target=" + "s3://" + e.names.SitesBucket + "/sites", "--set", "worker.preview_port=" + fmt.Sprint(previewPort)}
	c.serveP = c.start(append([]string{"serve", "--data", filepath.Join(dir, "data"), "--http", "127.0.0.1:0",
		"--preview", fmt.Sprintf("127.0.0.1:%d", previewPort), "--nats-listen", "", "--smtp", "", "--engine", e.engineURL,
		"--set", "mail.domains=edit.example.net", "--set", "mail.ses=true", "--set", "mail.ses_queue=" + e.queueURL,
		"--ready-file", ready, "--workers", "0", "--log-level", "warn"}, awsFlags...)...)
	t.Cleanup(c.stopAll)
	c.api, _ = waitReady(t, ready)
	c.start(append([]string{"worker", "--engine", e.engineURL, "--data", filepath.Join(dir, "data"), "--workers", "1",
		"--log-level", "warn"}, awsFlags...)...)
	agent := `sed -i "s|<h1>[^<]*</h1>|<h1>$WO_INSTRUCTION</h1>|" index.html && echo "The heading now says: $WO_INSTRUCTION"`
	c.cli(t, "project", "add", "--server", c.api, "--id", "site", "--repo", origin, "--agent", "command",
		"--agent-command", agent, "--sender", "alice@example.com=alice")

	start := time.Now()
	e.receive(t, "ses-e2e-1", "m1@example.com", "", "Welcome to our bakery")
	reply := e.awaitReply(t, "Welcome to our bakery", 90*time.Second)
	host := between(reply.Body.Text, "See the preview: http://", "/")
	if !strings.Contains(reply.Subject, "Our homepage") || !strings.HasSuffix(host, ".edit.site.localhost:"+fmt.Sprint(previewPort)) {
		t.Fatalf("reply %q does not link the thread's preview on port %d:\n%s", reply.Subject, previewPort, reply.Body.Text)
	}
	if body := fetchPreview(t, host); !strings.Contains(body, "Welcome to our bakery") {
		t.Fatalf("preview serves %q", body)
	}
	n := e.objects(t, e.names.SitesBucket, "sites/")
	if n == 0 {
		t.Fatalf("no objects under s3://%s/sites/: the preview was not deployed to S3", e.names.SitesBucket)
	}
	t.Logf("mail in through SES to reply out through SES in %s: %q (SES id %s), preview %d objects in S3",
		time.Since(start).Round(10*time.Millisecond), reply.Subject, reply.MessageID, n)

	// SES gave our reply its own Message-ID; alice's answer names only that one.
	// The thread shows in its preview's host name (<thread>.edit.<project>…).
	e.receive(t, "ses-e2e-2", "m2@example.com", "In-Reply-To: <"+reply.MessageID+"@"+sesDomain+">\r\n", "Now a bold tagline")
	second := e.awaitReply(t, "Now a bold tagline", 90*time.Second)
	if got := between(second.Body.Text, "See the preview: http://", "/"); got != host {
		t.Fatalf("the answer to SES's Message-ID went to the preview %q, want the thread's %q:\n%s", got, host, second.Body.Text)
	}
}

// TestAWSRestartedServeKeepsReplyTokens: on AWS, serve runs on Fargate, whose disk is new at
// every task start. A serve restarted on an empty data directory (same engine) still knows
// the reply tokens the previous one handed out: the owner's answer to a reply's Reply-To
// address, carrying no In-Reply-To (some mail clients drop it), continues the same thread.
func TestAWSRestartedServeKeepsReplyTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve twice and a worker on the AWS emulators (~30s)")
	}
	t.Parallel()
	e := newAWSEnv(t)
	dir := reachableTempDir(t)
	origin := bareSite(t, dir)
	c := &cluster{t: t, dir: dir, engine: e.engineURL}
	t.Cleanup(func() {
		c.stopAll()
		if t.Failed() {
			t.Logf("processes' log:\n%s", readFile(t, filepath.Join(dir, "procs.log")))
		}
	})
	awsFlags := []string{"--aws-region", "us-east-1", "--aws-endpoint", e.fauxqs, "--aws-ses-endpoint", e.ses,
		"--preview-target", "s3://" + e.names.SitesBucket + "/sites"}
	serve := func(task string) *exec.Cmd {
		ready := filepath.Join(dir, task+"-ready.json")
		p := c.start(append([]string{"serve", "--data", filepath.Join(dir, task), "--http", "127.0.0.1:0",
			"--preview", "", "--nats-listen", "", "--smtp", "", "--engine", e.engineURL,
			"--mail-domain", "edit.example.net", "--mail-ses", "--mail-ses-queue", e.queueURL,
			"--ready-file", ready, "--workers", "0", "--log-level", "warn"}, awsFlags...)...)
		c.api, _ = waitReady(t, ready)
		return p
	}
	first := serve("task1")
	c.start(append([]string{"worker", "--engine", e.engineURL, "--data", filepath.Join(dir, "worker"), "--workers", "1",
		"--log-level", "warn"}, awsFlags...)...)
	agent := `sed -i "s|<h1>[^<]*</h1>|<h1>$WO_INSTRUCTION</h1>|" index.html && echo "The heading now says: $WO_INSTRUCTION"`
	c.cli(t, "project", "add", "--server", c.api, "--data", filepath.Join(dir, "task1"), "--id", "site", "--repo", origin,
		"--agent", "command", "--agent-command", agent, "--sender", "alice@example.com=alice")
	e.receive(t, "ses-restart-1", "r1@example.com", "", "Fresh bread daily")
	reply := e.awaitReply(t, "Fresh bread daily", 90*time.Second)
	host := between(reply.Body.Text, "See the preview: http://", "/")
	var replyTo *mail.Address
	if len(reply.ReplyTo) == 1 {
		replyTo, _ = mail.ParseAddress(reply.ReplyTo[0])
	}
	if replyTo == nil || !strings.HasPrefix(replyTo.Address, "edit+") || host == "" {
		t.Fatalf("reply's Reply-To %q, preview %q:\n%s", reply.ReplyTo, host, reply.Body.Text)
	}

	_ = first.Process.Signal(syscall.SIGTERM) // the task stops; the next one starts on a new, empty disk
	_ = first.Wait()
	serve("task2")
	e.receiveTo(t, replyTo.Address, "ses-restart-2", "r2@example.com", "", "Now with croissants")
	second := e.awaitReply(t, "Now with croissants", 30*time.Second)
	if got := between(second.Body.Text, "See the preview: http://", "/"); got != host {
		t.Fatalf("after the restart, the answer to %s went to the preview %q, want the thread's %q:\n%s",
			replyTo.Address, got, host, second.Body.Text)
	}
}

// sesDomain is the domain of SES's Message-IDs in us-east-1 (outbox/ses.MessageIDDomain).
const sesDomain = "email.amazonses.com"

// awsEnv is a fresh prefix on the shared emulators with what `webordinary aws setup` creates.
type awsEnv struct {
	fauxqs, dynamodb, ses string
	names                 awssetup.Names
	engineURL, queueURL   string
	topicARN              string
	s3                    *s3.Client
	sns                   *sns.Client
}

func newAWSEnv(t *testing.T) *awsEnv {
	t.Helper()
	ctx := context.Background()
	e := &awsEnv{fauxqs: awstest.FauxQS(t), dynamodb: awstest.Dynalite(t), ses: awstest.SES(t)}
	prefix := awsqtest.Prefix()
	e.names = awssetup.NamesFor(prefix)
	if _, err := awssetup.Setup(ctx, awssetup.Config{Prefix: prefix, Region: "us-east-1", Endpoint: e.fauxqs,
		DynamoDBEndpoint: e.dynamodb, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatalf("aws setup: %v", err)
	}
	e.engineURL = "aws://?region=us-east-1&pollwait=2s&prefix=" + prefix + "&endpoint=" + neturl.QueryEscape(e.fauxqs) +
		"&dynamodb=" + neturl.QueryEscape(e.dynamodb)
	ac := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	e.s3 = s3.NewFromConfig(ac, func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(e.fauxqs), true })
	e.sns = sns.NewFromConfig(ac, func(o *sns.Options) { o.BaseEndpoint = aws.String(e.fauxqs) })
	q, err := sqs.NewFromConfig(ac, func(o *sqs.Options) { o.BaseEndpoint = aws.String(e.fauxqs) }).
		GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(e.names.InboundQueue)})
	if err != nil {
		t.Fatal(err)
	}
	topic, err := e.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(e.names.InboundTopic)}) // exists: its ARN
	if err != nil {
		t.Fatal(err)
	}
	e.queueURL, e.topicARN = *q.QueueUrl, *topic.TopicArn
	return e
}

// sesPass is SES's own Authentication-Results for mail that passed its checks.
const sesPass = "amazonses.com;\r\n spf=pass (spfCheck: domain of example.com designates 192.0.2.1 as permitted sender) client-ip=192.0.2.1; envelope-from=alice@example.com; helo=mail.example.com;\r\n dkim=pass header.i=@example.com;\r\n dmarc=pass header.from=example.com;"

// receive plays SES receiving alice's instruction: the raw message into the inbound bucket
// (with the headers SES prepends), then the notification through the topic.
func (e *awsEnv) receive(t *testing.T, id, messageID, headers, body string) {
	t.Helper()
	e.receiveTo(t, "edit@edit.example.net", id, messageID, headers, body)
}

// receiveTo is receive with the message addressed to to.
func (e *awsEnv) receiveTo(t *testing.T, to, id, messageID, headers, body string) {
	t.Helper()
	ctx, now := context.Background(), time.Now()
	raw := "Received: from mail.example.com by inbound-smtp.us-east-1.amazonaws.com with SMTP id " + id + "\r\n" +
		"X-SES-Spam-Verdict: PASS\r\nX-SES-Virus-Verdict: PASS\r\nAuthentication-Results: " + sesPass + "\r\n" +
		"From: Alice <alice@example.com>\r\nTo: " + to + "\r\nSubject: Our homepage\r\n" +
		"Message-ID: <" + messageID + ">\r\n" + headers + "Date: " + now.Format(time.RFC1123Z) + "\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n"
	key := awssetup.InboundKeyPrefix + id
	if _, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.names.InboundBucket), Key: aws.String(key),
		Body: strings.NewReader(raw)}); err != nil {
		t.Fatal(err)
	}
	pass := map[string]string{"status": "PASS"}
	n := map[string]any{
		"notificationType": "Received",
		"receipt": map[string]any{
			"timestamp": now.UTC().Format(time.RFC3339Nano), "recipients": []string{to},
			"spamVerdict": pass, "virusVerdict": pass, "spfVerdict": pass, "dkimVerdict": pass, "dmarcVerdict": pass,
			"action": map[string]any{"type": "S3", "topicArn": e.topicARN, "bucketName": e.names.InboundBucket, "objectKey": key},
		},
		"mail": map[string]any{"timestamp": now.UTC().Format(time.RFC3339Nano), "source": "alice@example.com",
			"messageId": id, "destination": []string{to}},
	}
	data, _ := json.Marshal(n)
	if _, err := e.sns.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(e.topicARN), Message: aws.String(string(data))}); err != nil {
		t.Fatal(err)
	}
}

// sesEmail is what aws-ses-v2-local's GET /store lists per message.
type sesEmail struct {
	MessageID string   `json:"messageId"`
	From      string   `json:"from"`
	ReplyTo   []string `json:"replyTo"`
	Subject   string   `json:"subject"`
	Body      struct {
		Text string `json:"text"`
	} `json:"body"`
}

// awaitReply waits for the reply that quotes text (the emulator's store is shared by the
// package's tests: each test's instructions are its own).
func (e *awsEnv) awaitReply(t *testing.T, text string, within time.Duration) sesEmail {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, m := range e.sent(t) {
			if strings.Contains(m.Body.Text, text) {
				return m
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no reply in aws-ses-v2-local's store within %s", within)
	return sesEmail{}
}

func (e *awsEnv) sent(t *testing.T) []sesEmail {
	t.Helper()
	resp, err := http.Get(e.ses + "/store")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Emails []sesEmail `json:"emails"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Emails
}

// objects counts the objects under prefix in bucket (one page is enough to tell).
func (e *awsEnv) objects(t *testing.T, bucket, prefix string) int {
	t.Helper()
	out, err := e.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

// freePort is a loopback port that was free a moment ago (the worker process must know serve's
// preview port for its links before serve binds it).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestDeployFilesUseRealVariables: every WO_* variable the deploy files set (the AWS
// template, the Dockerfile, compose.yaml, the systemd units) is read by a flag or a config key
// of serve or worker (the configuration reference lists each one's variable).
func TestDeployFilesUseRealVariables(t *testing.T) {
	t.Parallel()
	ref := flagReference()
	for _, f := range []string{"deploy/aws/template.yaml", "Dockerfile", "compose.yaml", "deploy/webordinary.service", "deploy/webordinary-worker.service"} {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		code := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(string(data), "") // comments name other variables too
		vars := regexp.MustCompile(`\b(WO_[A-Z0-9_]+)[=:",]`).FindAllStringSubmatch(code, -1)
		if f == "deploy/aws/template.yaml" && len(vars) == 0 {
			t.Fatal("no WO_* variables in the template")
		}
		for _, v := range vars {
			if !strings.Contains(ref, "["+v[1]+"]") && !strings.Contains(ref, "`"+v[1]+"`") {
				t.Errorf("%s sets %s, which no flag or config key reads", f, v[1])
			}
		}
	}
}
