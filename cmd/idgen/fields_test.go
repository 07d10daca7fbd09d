package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/audit"
)

// TestFieldFlags walks fieldFlags: every field it names exists on its
// struct, and every flag is one of idgen serve's.
func TestFieldFlags(t *testing.T) {
	types := map[string]reflect.Type{}
	for _, v := range []any{app.Config{}, app.TracingConfig{}, idgen.Settings{}, idgen.LeaseSettings{},
		idgen.RateLimit{}, allocator.KeeperSettings{}, allocator.SegmentSettings{}, audit.RecorderSettings{}, app.AuditConfig{}} {
		types[reflect.TypeOf(v).Name()] = reflect.TypeOf(v)
	}
	fs := newServeFlags().f.fs
	for field, flag := range fieldFlags {
		typeName, fieldName, _ := strings.Cut(field, ".")
		typ, ok := types[typeName]
		if !ok {
			t.Errorf("%s: got no struct named %s, want one of %v", field, typeName, types)
		} else if _, ok := typ.FieldByName(fieldName); !ok {
			t.Errorf("%s: %s has no field %s", field, typ, fieldName)
		}
		if fs.Lookup(flag) == nil {
			t.Errorf("%s: got flag --%s, want a flag of idgen serve", field, flag)
		}
	}
}

func TestFlagWords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"invalid KeeperSettings.Heartbeat 20s: want at most half of KeeperSettings.TTL 30s",
			"invalid --heartbeat 20s: want at most half of --lease-ttl 30s"},
		{"invalid KeeperSettings.MaxCeilingAhead -1s: want at least 0", "invalid KeeperSettings.MaxCeilingAhead -1s: want at least 0"},
		{"listen on 127.0.0.1:80 (Config.Listen): bind: permission denied", "listen on 127.0.0.1:80 (--listen): bind: permission denied"},
		{"invalid RateLimit.Burst 5 at RateLimit.Rate 1e-05", "invalid --rate-burst 5 at --rate-limit 1e-05"},
	} {
		if got := flagWords(tc.in); got != tc.want {
			t.Errorf("flagWords(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
