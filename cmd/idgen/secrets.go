package main

import (
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Secrets never reach idgen's output. Every DSN idgen logs or puts in an
// error goes through stores.Redact first; as a second line of defence, a
// scrubber replaces the DSN's password and the admin token in everything a
// command writes to stderr and in the error it returns, whichever layer
// (database driver, store, keeper) let one slip into a message.

// minSecretLen: shorter values are not scrubbed, since replacing every "1"
// or "ab" in the output would mangle it; such passwords are not secrets.
const minSecretLen = 4

const redacted = "xxxxx"

var (
	// userinfoPassword finds "user:password@" in a URL or a driver DSN.
	userinfoPassword = regexp.MustCompile(`:([^:@/]+)@`)
	// queryPassword finds password parameters in a query string.
	queryPassword = regexp.MustCompile(`(?i)\b(?:password|passwd|pass|pwd)=([^&\s]+)`)
)

// scrubber removes known secrets from text.
type scrubber struct{ secrets []string }

// newScrubber returns a scrubber for the secrets of dsn (its password,
// however it is written, well-formed or not) and for the other secrets given.
func newScrubber(dsn string, others ...string) *scrubber {
	var s []string
	add := func(v string) {
		s = append(s, v)
		if u, err := url.QueryUnescape(v); err == nil {
			s = append(s, u)
		}
		if u, err := url.PathUnescape(v); err == nil {
			s = append(s, u)
		}
		s = append(s, url.QueryEscape(v), url.PathEscape(v))
	}
	if u, err := url.Parse(dsn); err == nil {
		if pw, ok := u.User.Password(); ok {
			add(pw)
		}
	}
	for _, m := range userinfoPassword.FindAllStringSubmatch(dsn, -1) {
		add(m[1])
	}
	for _, m := range queryPassword.FindAllStringSubmatch(dsn, -1) {
		add(m[1])
	}
	for _, o := range others {
		add(o)
	}
	s = slices.DeleteFunc(s, func(v string) bool { return len(v) < minSecretLen || v == redacted })
	// Longest first, so that a secret containing another is replaced whole.
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	return &scrubber{secrets: slices.Compact(s)}
}

// scrub returns text with every secret replaced.
func (sc *scrubber) scrub(text string) string {
	for _, v := range sc.secrets {
		text = strings.ReplaceAll(text, v, redacted)
	}
	return text
}

// err returns err with the secrets scrubbed from its message; errors.Is and
// errors.As still see the original.
func (sc *scrubber) err(err error) error {
	if err == nil || len(sc.secrets) == 0 {
		return err
	}
	return &scrubbedError{msg: sc.scrub(err.Error()), err: err}
}

// writer returns w with the secrets scrubbed from every Write. A log
// handler writes each record in one call, so no secret is split across
// calls.
func (sc *scrubber) writer(w io.Writer) io.Writer {
	if len(sc.secrets) == 0 {
		return w
	}
	return scrubWriter{sc: sc, w: w}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

type scrubWriter struct {
	sc *scrubber
	w  io.Writer
}

func (s scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, s.sc.scrub(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
