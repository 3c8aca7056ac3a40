package hostile

import (
	"context"
	"errors"
	"io"
	"testing"
)

// zeros reads like /dev/zero: it never ends.
type zeros struct{ reads int }

func (z *zeros) Read(p []byte) (int, error) {
	z.reads++
	clear(p)
	return len(p), nil
}

// TestCopyBoundedGrowsNoFurther: a file that grows while read (the size at open was under
// the limit) still stops at the limit, and an endless one at the context's end.
func TestCopyBoundedGrowsNoFurther(t *testing.T) {
	t.Parallel()
	if _, err := copyBounded(context.Background(), io.Discard, &zeros{}, "zz", 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("endless read with a limit: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	z := &zeros{}
	w := writerFunc(func(p []byte) (int, error) {
		if z.reads == 3 {
			cancel()
		}
		return len(p), nil
	})
	if _, err := copyBounded(ctx, w, z, "zz", 1<<62); !errors.Is(err, context.Canceled) || z.reads != 3 {
		t.Fatalf("endless read after cancel: %v after %d reads", err, z.reads)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
