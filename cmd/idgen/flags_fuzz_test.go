package main

import (
	"testing"

	"github.com/idgen-project/idgen/snowflake"
)

// FuzzLayoutFlag: --layout either refuses its text or holds widths that
// sum to at most 63, which String writes back as text Set accepts again.
func FuzzLayoutFlag(f *testing.F) {
	for _, s := range []string{"41/5/5/12", "js53", "classic", "40/0/6/7", "41/5/5/13", "63/0/0/0", "a/b/c/d", "-1/0/0/64", "js53-workers", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var l layoutFlag
		if err := l.Set(s); err != nil {
			return
		}
		if sum := l.time + l.datacenter + l.worker + l.sequence; sum > 63 || min(l.time, l.datacenter, l.worker, l.sequence) < 0 {
			t.Fatalf("Set(%q) accepted %s", s, l.String())
		}
		var back layoutFlag
		if err := back.Set(l.String()); err != nil || back != l {
			t.Fatalf("Set(%q).String() = %q reads back as %v, %v", s, l.String(), back, err)
		}
	})
}

// FuzzFormatsFlag: --id-format either refuses its text or holds valid
// namespaces and formats, which String writes back as text Set accepts
// again.
func FuzzFormatsFlag(f *testing.F) {
	for _, s := range []string{"base32", "orders=hex", "base62,orders=hex,invoices=decimal", "", "hex,hex", "Orders=hex", "orders=", "=hex", ",", "orders=hex=base32"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var fl formatsFlag
		if err := fl.Set(s); err != nil {
			return
		}
		for ns, format := range fl.m {
			if format < snowflake.FormatDecimal || format > snowflake.FormatHex {
				t.Fatalf("Set(%q) accepted format %v for %q", s, format, ns)
			}
		}
		var back formatsFlag
		if err := back.Set(fl.String()); err != nil || back.String() != fl.String() {
			t.Fatalf("Set(%q).String() = %q reads back as %q, %v", s, fl.String(), back.String(), err)
		}
	})
}
