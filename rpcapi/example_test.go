package rpcapi_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen/app"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
	"github.com/idgen-project/idgen/rpcapi"
)

// A caller of IdService over gRPC (cleartext HTTP/2, as idgen serves it on
// its HTTP listener), with connect-go's client: three Snowflake IDs and
// the breakdown of the first. Any gRPC client works the same way; the
// node here is an app.App on an SQLite file, as `idgen serve` runs it.
func Example() {
	dir, err := os.MkdirTemp("", "idgen-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	node, err := app.Open(ctx, app.Config{DSN: "sqlite:" + filepath.Join(dir, "idgen.db"), Migrate: true, Listen: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = node.Serve() }()
	defer func() { _ = node.Close(ctx) }()
	// The node issues once it holds a worker lease, soon after Open.
	for deadline := time.Now().Add(10 * time.Second); node.Keeper().Ready() != nil; {
		if time.Now().After(deadline) {
			log.Fatal(node.Keeper().Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// gRPC over cleartext HTTP/2 (h2c) with prior knowledge.
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	ids := idgenv1connect.NewIdServiceClient(hc, "http://"+node.Addr().String(), connect.WithGRPC())

	res, err := ids.NextIds(ctx, connect.NewRequest(&idgenv1.NextIdsRequest{Count: 3}))
	if err != nil {
		log.Fatal(err)
	}
	got := res.Msg.GetIds()
	fmt.Println(len(got), "IDs from", res.Msg.GetSource(), "increasing:", got[0] < got[1] && got[1] < got[2])
	fmt.Println("lease token, worker", res.Msg.GetFencingToken().GetLease().GetWorker())

	parsed, err := ids.Parse(ctx, connect.NewRequest(&idgenv1.ParseRequest{Id: got[0]}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker", parsed.Msg.GetWorker(), "datacenter", parsed.Msg.GetDatacenter())
	// Output:
	// 3 IDs from SOURCE_SNOWFLAKE increasing: true
	// lease token, worker 0
	// worker 0 datacenter 0
}

// Serving both stacks on one port, as app.App does: the HTTP server gets
// the connections Listen does not give grpc-go, and the shutdown runs
// Drain, the HTTP server's Shutdown, Shutdown and Wait in that order.
// (Compiled, not run: s comes from rpcapi.New.)
func ExampleServer_Listen() {
	var s *rpcapi.Server // from rpcapi.New
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: s.Mount(http.NotFoundHandler()), Protocols: &protocols, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.Listen(ln, srv.ReadHeaderTimeout)) }()

	// At shutdown:
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Drain()
	_ = srv.Shutdown(ctx)
	_ = s.Shutdown(ctx)
	_ = s.Wait(ctx)
	<-served
}
