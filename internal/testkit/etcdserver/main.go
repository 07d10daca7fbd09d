// Command server is etcd itself, built from go.etcd.io/etcd/server/v3 at the
// version pinned in this directory's go.mod, for idgen's tests: it is the
// cluster internal/testkit starts. It lives in a module of its own so that
// idgen's module does not take the etcd server's dependencies.
//
//	go build -o etcd .    # from this directory
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
