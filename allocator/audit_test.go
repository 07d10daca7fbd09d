package allocator_test

import (
	"strings"
	"testing"

	"github.com/idgen-project/idgen/allocator"
)

func TestBlockValidate(t *testing.T) {
	const perMS = 4096
	for _, tc := range []struct {
		b    allocator.Block
		want string // "" for valid
	}{
		{allocator.Block{}, ""},
		{allocator.Block{Count: 4096, FromMS: 10, ToMS: 10}, ""},
		{allocator.Block{Count: 8192, FromMS: 10, ToMS: 11}, ""},
		{allocator.Block{Count: 4097, FromMS: 10, ToMS: 10}, "exceeds the 4096 IDs per millisecond"},
		{allocator.Block{Count: -1, FromMS: 10, ToMS: 10}, "negative"},
		{allocator.Block{Count: 0, FromMS: 10, ToMS: 10}, "leave the block out"},
		{allocator.Block{Count: 5, FromMS: 11, ToMS: 10}, "want 0 < from_ms <= to_ms"},
		{allocator.Block{Count: 5, FromMS: 0, ToMS: 10}, "want 0 < from_ms <= to_ms"},
	} {
		err := tc.b.Validate(perMS)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v): got %v, want %q", tc.b, err, tc.want)
		}
	}
}
