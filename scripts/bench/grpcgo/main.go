// Command grpcgo measures what a unary gRPC call costs in
// google.golang.org/grpc's own transport, the alternative to serving gRPC
// with connect-go on idgen's HTTP listener (docs/architecture.md, "One
// listener, connect-go"). It starts a grpc-go server in a child process
// whose IdService.NextIds handler returns one ID and does nothing else (no
// idgen code, no interceptors), calls it from grpc-go clients, one call in
// flight per connection, as idgen-loadtest --transport grpc does, and
// prints the calls per second and the CPU each side spent per call:
//
//	go run ./scripts/bench/grpcgo --conns 8 --duration 10s
//
// Only loopback addresses are used.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serve(); err != nil {
			fmt.Fprintln(os.Stderr, "grpcgo serve:", err)
			os.Exit(1)
		}
		return
	}
	conns := flag.Int("conns", 8, "client connections, one call in flight on each")
	duration := flag.Duration("duration", 10*time.Second, "how long to measure")
	warmup := flag.Duration("warmup", 2*time.Second, "unmeasured calls before the measurement")
	flag.Parse()
	if err := run(*conns, *warmup, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "grpcgo:", err)
		os.Exit(1)
	}
}

// serve runs the server: it prints its address on stdout and serves until
// it is killed.
func serve() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "idgen.v1.IdService",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "NextIds", Handler: nextIDs}},
	}, struct{}{})
	return s.Serve(ln)
}

var issued atomic.Int64

func nextIDs(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var req idgenv1.NextIdsRequest
	if err := dec(&req); err != nil {
		return nil, err
	}
	return &idgenv1.NextIdsResponse{Ids: []int64{issued.Add(1) << 22}}, nil
}

func run(conns int, warmup, duration time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	srv := exec.Command(self, "serve")
	srv.Stderr = os.Stderr
	out, err := srv.StdoutPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	}()
	buf := make([]byte, 64)
	n, err := out.Read(buf)
	if err != nil {
		return fmt.Errorf("read the server's address: %w", err)
	}
	addr := strings.TrimSpace(string(buf[:n]))

	var calls atomic.Int64
	var measuring atomic.Bool
	var firstErr error
	var once sync.Once
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range conns {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer cc.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &idgenv1.NextIdsRequest{Count: 1}
			for {
				select {
				case <-stop:
					return
				default:
				}
				var resp idgenv1.NextIdsResponse
				if err := cc.Invoke(context.Background(), "/idgen.v1.IdService/NextIds", req, &resp); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				if measuring.Load() {
					calls.Add(1)
				}
			}
		}()
	}
	time.Sleep(warmup)
	srvCPU0, err := processCPU(srv.Process.Pid)
	if err != nil {
		return err
	}
	cliCPU0, start := selfCPU(), time.Now()
	measuring.Store(true)
	time.Sleep(duration)
	measuring.Store(false)
	elapsed, cliCPU := time.Since(start), selfCPU()-cliCPU0
	srvCPU1, err := processCPU(srv.Process.Pid)
	if err != nil {
		return err
	}
	close(stop)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	c := calls.Load()
	if c == 0 {
		return errors.New("no call completed")
	}
	perCall := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(c) }
	fmt.Printf("grpc-go unary NextIds count=1, %d connections: %.0f calls/s; server %.1f CPU-µs/call, client %.1f CPU-µs/call\n",
		conns, float64(c)/elapsed.Seconds(), perCall(srvCPU1-srvCPU0), perCall(cliCPU))
	return nil
}

// selfCPU returns this process's CPU time (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU returns the CPU time (user + system) of process pid, from
// /proc/pid/stat in clock ticks of 10 ms (USER_HZ is 100 on Linux).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
