package ses_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/mail/outbox/ses"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func client(endpoint, region string) *sesv2.Client {
	ac := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	return sesv2.NewFromConfig(ac, func(o *sesv2.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

const reply = "From: webordinary <edit@edit.example.net>\r\nTo: alice@example.com\r\nSubject: Re: header\r\n" +
	"Message-ID: <wo-done-%s@edit.example.net>\r\nIn-Reply-To: <m1@example.com>\r\nMIME-Version: 1.0\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n\r\nDone: %s\r\n"

// storedEmail is what aws-ses-v2-local's GET /store lists per message.
type storedEmail struct {
	MessageID string `json:"messageId"`
	From      string `json:"from"`
	Subject   string `json:"subject"`
	Body      struct {
		Text string `json:"text"`
	} `json:"body"`
}

func store(t *testing.T, endpoint string) []storedEmail {
	t.Helper()
	resp, err := http.Get(endpoint + "/store")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Emails []storedEmail `json:"emails"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Emails
}

// TestSendRecordsSESMessageID: the raw message reaches aws-ses-v2-local, and Sent gets SES's
// id in Message-ID form together with the message as composed.
func TestSendRecordsSESMessageID(t *testing.T) {
	t.Parallel()
	endpoint := awstest.SES(t)
	var mu sync.Mutex
	got := map[string]string{}
	s, err := ses.New(ses.Config{Client: client(endpoint, "us-east-1"), Sent: func(_ context.Context, msg []byte, id string) error {
		mu.Lock()
		defer mu.Unlock()
		got[id] = string(msg)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprint("marker-", os.Getpid(), "-", t.Name())
	msg := fmt.Sprintf(reply, "1", marker)
	if err := s.Send(context.Background(), "edit@edit.example.net", []string{"alice@example.com"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	var sesID string
	for _, e := range store(t, endpoint) {
		if strings.Contains(e.Body.Text, marker) {
			sesID = e.MessageID
			if e.Subject != "Re: header" {
				t.Errorf("stored subject %q, want Re: header", e.Subject)
			}
		}
	}
	if sesID == "" {
		t.Fatalf("the message is not in aws-ses-v2-local's store")
	}
	want := "<" + sesID + "@email.amazonses.com>"
	if got[want] != msg {
		t.Fatalf("Sent calls = %v, want %s with the composed message", got, want)
	}
}

// TestErrorClasses: SES's refusals are permanent; throttling, server errors and an unreachable
// endpoint are temporary. The endpoint plays SES's error responses (aws-ses-v2-local accepts
// everything).
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		code   string
		want   error
	}{
		{"rejected", 400, "MessageRejected", outbox.ErrPermanent},
		{"mail from not verified", 400, "MailFromDomainNotVerifiedException", outbox.ErrPermanent},
		{"account suspended", 400, "AccountSuspendedException", outbox.ErrPermanent},
		{"sending paused", 400, "SendingPausedException", outbox.ErrPermanent},
		{"bad request", 400, "BadRequestException", outbox.ErrPermanent},
		{"throttled", 429, "TooManyRequestsException", outbox.ErrTemporary},
		{"limit exceeded", 400, "LimitExceededException", outbox.ErrTemporary},
		{"server error", 500, "InternalFailure", outbox.ErrTemporary},
		{"unavailable", 503, "ServiceUnavailable", outbox.ErrTemporary},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("x-amzn-ErrorType", c.code)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				fmt.Fprintf(w, `{"message":"%s from the test endpoint"}`, c.code)
			}))
			defer srv.Close()
			s, _ := ses.New(ses.Config{Client: client(srv.URL, "eu-west-1")})
			err := s.Send(context.Background(), "edit@edit.example.net", []string{"a@example.com"}, []byte(fmt.Sprintf(reply, "2", "x")))
			if !errors.Is(err, c.want) {
				t.Fatalf("Send = %v, want %v", err, c.want)
			}
			if calls.Load() != 1 {
				t.Errorf("%d calls, want 1 (the outbox retries, not the sender)", calls.Load())
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		s, _ := ses.New(ses.Config{Client: client("http://"+addr, "us-east-1")})
		if err := s.Send(context.Background(), "e@x", []string{"a@x"}, []byte(fmt.Sprintf(reply, "3", "x"))); !errors.Is(err, outbox.ErrTemporary) {
			t.Fatalf("Send to a closed port = %v, want ErrTemporary", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s, _ := ses.New(ses.Config{Client: client("http://127.0.0.1:1", "us-east-1")})
		if err := s.Send(ctx, "e@x", []string{"a@x"}, []byte("x")); err != context.Canceled {
			t.Fatalf("Send with a cancelled ctx = %v, want context.Canceled unwrapped", err)
		}
	})
}

func TestMessageIDDomain(t *testing.T) {
	t.Parallel()
	for region, want := range map[string]string{"": "email.amazonses.com", "us-east-1": "email.amazonses.com", "eu-west-1": "eu-west-1.amazonses.com"} {
		if got := ses.MessageIDDomain(region); got != want {
			t.Errorf("MessageIDDomain(%q) = %q, want %q", region, got, want)
		}
	}
}
