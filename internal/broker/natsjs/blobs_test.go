package natsjs_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
)

// TestBlobMaxAgeFreesTheSpace: a blob past its store's max age is not only unreadable (the
// conformance suite) but gone from the engine's disk: the object store's stream has the max
// age and, soon after, holds nothing. A store made before max ages (a deployment upgraded)
// gets it from the first process that opens it with one, old blobs included.
func TestBlobMaxAgeFreesTheSpace(t *testing.T) {
	t.Parallel()
	env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
	ctx := t.Context()
	before, err := env.Backend.Blobs(ctx, "pictures") // as an older binary opened it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := before.Put(ctx, "job0", bytes.Repeat([]byte("o"), 300<<10)); err != nil {
		t.Fatal(err)
	}
	_, upgraded := natsjstest.Connect(t, env) // another process, of this version
	s, err := upgraded.Blobs(ctx, "pictures", broker.BlobMaxAge(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "job1", bytes.Repeat([]byte("p"), 300<<10)); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(env.Conn)
	st, err := js.Stream(ctx, "OBJ_wo_b_pictures")
	if err != nil {
		t.Fatal(err)
	}
	if age := st.CachedInfo().Config.MaxAge; age != time.Second {
		t.Fatalf("the pictures store's stream has max age %s; want 1s", age)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Bytes == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15s after a blob with a 1s max age was put, its store holds %d bytes", info.State.Bytes)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
