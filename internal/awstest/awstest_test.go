package awstest_test

import (
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/awstest"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// TestEmulatorsAnswer: each emulator serves HTTP on loopback once its accessor returns.
func TestEmulatorsAnswer(t *testing.T) {
	for name, endpoint := range map[string]func(testing.TB) string{
		"fauxqs": awstest.FauxQS, "dynalite": awstest.Dynalite, "ses": awstest.SES, "dynamodb-local": awstest.DynamoDBLocal,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := endpoint(t)
			if !strings.HasPrefix(url, "http://127.0.0.1:") {
				t.Fatalf("expected a loopback endpoint, got %q", url)
			}
			resp, err := http.Post(url, "application/x-amz-json-1.0", strings.NewReader("{}"))
			if err != nil {
				t.Fatalf("expected %s to answer at %s, got %v", name, url, err)
			}
			resp.Body.Close()
			t.Logf("%s at %s answered %s", name, url, resp.Status)
		})
	}
}

// TestDynaliteSurvivesAClientGoneMidRequest: a Go client whose context ends resets its
// connection in the middle of a request body. dynalite threw on that and exited, taking every
// later test's backend with it (seen under load, when contexts run out).
func TestDynaliteSurvivesAClientGoneMidRequest(t *testing.T) {
	url := awstest.StartOwnDynalite(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n" +
		"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{\"a\":"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let dynalite start reading the body
	_ = c.(*net.TCPConn).SetLinger(0)  // close with a reset, as a cancelled client does
	c.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Post(url, "application/x-amz-json-1.0", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dynalite no longer answers after a client reset mid-request: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
