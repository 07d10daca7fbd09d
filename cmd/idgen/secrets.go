package main

import (
	"cmp"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/idgen-project/idgen/internal/dburl"
)

// Secrets never reach idgen's output: besides dburl.Redact, a scrubber
// removes the DSN's secrets and the admin token from stderr and returned
// errors, whichever layer let one slip.

// minSecretLen: shorter values are not scrubbed, lest output be mangled.
const minSecretLen = 4

const redacted = dburl.Mask

// scrubber removes known secrets from text.
type scrubber struct{ secrets []string }

// newScrubber returns a scrubber for dsn's password (however written) and
// others, each also URL-escaped and unescaped.
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
	for _, v := range dburl.Secrets(dsn) {
		add(v)
	}
	for _, o := range others {
		add(o)
	}
	s = slices.DeleteFunc(s, func(v string) bool { return len(v) < minSecretLen || v == redacted })
	// Longest first, so a secret containing another goes whole.
	slices.SortFunc(s, func(a, b string) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return &scrubber{secrets: slices.Compact(s)}
}

func (sc *scrubber) scrub(text string) string {
	for _, v := range sc.secrets {
		text = strings.ReplaceAll(text, v, redacted)
	}
	return text
}

// err scrubs err's message; Is and As still see the original.
func (sc *scrubber) err(err error) error {
	if err == nil || len(sc.secrets) == 0 {
		return err
	}
	return &scrubbedError{msg: sc.scrub(err.Error()), err: err}
}

// writer scrubs every Write to w (a log record is one Write).
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
