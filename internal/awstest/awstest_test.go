package awstest_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

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
