package natsjs

import (
	"reflect"
	"testing"
)

// TestSplitRange: the parts cover the range once, in order, at most n of them.
func TestSplitRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		start, last, n uint64
		want           [][2]uint64
	}{
		{1, 1, 8, [][2]uint64{{1, 1}}},
		{1, 3, 8, [][2]uint64{{1, 1}, {2, 2}, {3, 3}}},
		{5, 20, 4, [][2]uint64{{5, 8}, {9, 12}, {13, 16}, {17, 20}}},
		{1, 10, 3, [][2]uint64{{1, 4}, {5, 8}, {9, 10}}},
		{7, 6, 8, nil},
	} {
		if got := splitRange(c.start, c.last, c.n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("splitRange(%d, %d, %d) = %v, want %v", c.start, c.last, c.n, got, c.want)
		}
	}
}
