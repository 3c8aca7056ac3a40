package awsq_test

import (
	"testing"
	"time"

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
	for _, bad := range []string{"nats://x", "aws://host?region=x", "aws://?regoin=x", "aws://?create=maybe", "aws://?pollwait=soon"} {
		if _, err := awsq.ParseURL(bad); err == nil {
			t.Errorf("expected %q to be refused", bad)
		}
	}
}
