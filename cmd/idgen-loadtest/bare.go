package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// bareBody is what the bare echo server answers: a constant body shaped like
// idgen's answer to GET /ids?count=1, so both move the same bytes.
var bareBody = []byte(`{"ids":["271828182845904523"],"source":"snowflake","lease":{"datacenter":0,"worker":0,"fencing_version":1}}`)

// bareEcho is the hidden subcommand "bare-echo": an echo v4 server with one
// route, GET /ids, answering a constant JSON body with no middleware. It is
// the baseline of docs/benchmarks.md: what the HTTP stack alone sustains on
// this machine, measured by the same tool over the same connections as idgen.
// It serves until ctx ends.
func bareEcho(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("idgen-loadtest bare-echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "`address` to listen on")
	allowRemote := fs.Bool("allow-remote", false, "allow listening on an address that is not loopback")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "idgen-loadtest bare-echo: %v\n", err)
		return exitFail
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !*allowRemote && (!ok || !tcp.IP.IsLoopback()) {
		_ = ln.Close()
		fmt.Fprintf(stderr, "idgen-loadtest bare-echo: %s is not a loopback address (pass --allow-remote)\n", ln.Addr())
		return exitUsage
	}
	srv := bareServer()
	fmt.Fprintf(stdout, "bare-echo listening on http://%s\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		fmt.Fprintf(stderr, "idgen-loadtest bare-echo: %v\n", err)
		return exitFail
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-done // Serve returns ErrServerClosed once Shutdown began
	if err != nil {
		fmt.Fprintf(stderr, "idgen-loadtest bare-echo: shutdown: %v\n", err)
		return exitFail
	}
	return exitOK
}

// bareServer is the bare echo server, with the same server settings as
// idgen's (keep-alive, timeouts, header limit).
func bareServer() *http.Server {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/ids", func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, bareBody)
	})
	return &http.Server{
		Handler:           e,
		MaxHeaderBytes:    16 << 10,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
}
