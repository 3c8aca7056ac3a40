package awsq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"

	"github.com/webordinary/webordinary/internal/broker/awsq"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	cfg, err := awsq.ParseURL("aws://?region=eu-west-1&prefix=wo2&endpoint=http://127.0.0.1:4566&create=1&pollwait=5s&bucket=b")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-1" || cfg.Prefix != "wo2" || cfg.Endpoint != "http://127.0.0.1:4566" || !cfg.Create || cfg.PollWait != 5*time.Second || cfg.Bucket != "b" {
		t.Errorf("unexpected config %+v", cfg)
	}
	for _, bad := range []string{"nats://x", "aws://host?region=x", "aws://?regoin=x", "aws://?create=maybe", "aws://?pollwait=soon", "aws://?pollwait=1m", "aws://?prefix=Bad_Prefix", "aws://?endpoint=localhost:4566", "aws://key:secret@?region=x"} {
		if _, err := awsq.ParseURL(bad); err == nil {
			t.Errorf("expected %q to be refused", bad)
		}
	}
}

// TestOpenByURL: broker.Open knows the aws scheme, and a bad URL's error names what to fix.
func TestOpenByURL(t *testing.T) {
	t.Parallel()
	_, err := broker.Open(context.Background(), "aws://?regoin=eu-west-1", broker.Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown parameter "regoin"`) || !strings.Contains(err.Error(), "region") {
		t.Errorf("expected an error naming the unknown parameter and the known ones, got %v", err)
	}
}

// TestNegativeClockSkewIsRefused: a negative allowance would let others take a lease over
// before its holder stops; New refuses it before it reaches AWS.
func TestNegativeClockSkewIsRefused(t *testing.T) {
	_, err := awsq.New(t.Context(), awsq.Config{Region: "us-east-1", Endpoint: "http://127.0.0.1:1", ClockSkew: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "ClockSkew") {
		t.Fatalf("New with a negative ClockSkew: %v; want a refusal naming it", err)
	}
}
