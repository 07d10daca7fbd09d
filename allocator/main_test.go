package allocator_test

import (
	"os"
	"testing"

	"github.com/idgen-project/idgen/internal/testkit"
)

// TestMain stops the etcd test cluster that the keeper and segment
// integration tests start.
func TestMain(m *testing.M) { os.Exit(testkit.EtcdMain(m)) }
