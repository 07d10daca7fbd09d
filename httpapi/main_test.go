package httpapi_test

import (
	"os"
	"testing"

	"github.com/idgen-project/idgen/internal/testkit"
)

// TestMain stops the etcd test cluster, if a test started one.
func TestMain(m *testing.M) { os.Exit(testkit.EtcdMain(m)) }
