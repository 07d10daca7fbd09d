package etcd_test

import (
	"context"
	"fmt"
	"log"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/etcd"
)

// Open a store on a three-member cluster with TLS and a password, and
// fetch a range of a namespace. (Not run: it needs a cluster.)
func ExampleOpen() {
	ctx := context.Background()
	s, err := etcd.Open(ctx, "etcd://idgen:secret@etcd-0:2379,etcd-1:2379,etcd-2:2379/idgen"+
		"?ca_file=/etc/idgen/etcd-ca.pem&cert_file=/etc/idgen/client.pem&key_file=/etc/idgen/client-key.pem")
	if err != nil {
		log.Fatal(err) // the error shows the DSN with its password replaced
	}
	defer s.Close()
	seg, err := s.FetchSegment(ctx, "orders", 1000)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(seg.First, seg.Last)
	var _ allocator.Store = s
}
