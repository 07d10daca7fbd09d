// Package dburl knows the shape of idgen's DSNs, the database URLs given to
// --dsn, without opening anything:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	mysql://user:pass@host:3306/db
//	sqlite:path/to/idgen.db
//	etcd://user:pass@host1:2379,host2:2379,host3:2379/prefix   (etcds:// for TLS)
//
// It is the one place that decides which database a DSN names (DialectOf),
// what of a DSN may be shown (Redact), and which parts of it are secrets
// (Secrets), so that the stores, internal/stores and the command line agree
// on all three. It imports no database driver.
package dburl

import (
	"net/url"
	"regexp"
	"strings"
)

// Dialect is the database a DSN names.
type Dialect string

// The dialects idgen supports.
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql"
	SQLite   Dialect = "sqlite"
	Etcd     Dialect = "etcd"
)

// Mask replaces a password in a redacted DSN.
const Mask = "xxxxx"

// DialectOf returns the dialect of dsn by its scheme (postgres://,
// postgresql://, mysql://, sqlite:, etcd:// or etcds://), or "" for any
// other.
func DialectOf(dsn string) Dialect {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return Postgres
	case strings.HasPrefix(dsn, "mysql://"):
		return MySQL
	case strings.HasPrefix(dsn, "sqlite:"):
		return SQLite
	case strings.HasPrefix(dsn, "etcd://"), strings.HasPrefix(dsn, "etcds://"):
		return Etcd
	}
	return ""
}

// Redact returns dsn fit for a log line or an error message: a URL with its
// password, and any secret query parameter (see Secrets), replaced by Mask;
// a sqlite: DSN (a file name, no secret) unchanged; anything else (opaque or
// unparsable) reduced to a placeholder, since it may hold a password in a
// form not recognised. An etcd DSN's list of members, which net/url cannot
// parse when it holds bracketed IPv6 addresses, is kept as it is.
func Redact(dsn string) string {
	switch DialectOf(dsn) {
	case SQLite:
		return dsn
	case Etcd:
		return redactHostList(dsn)
	}
	return redactURL(dsn)
}

// hostListStandIn replaces an etcd DSN's member list while net/url parses
// the rest.
const hostListStandIn = "members.invalid"

// redactHostList is Redact for a DSN whose host part is a comma-separated
// list of members: the list (which holds no secret) is set aside, the rest
// redacted as a URL, and the list put back.
func redactHostList(dsn string) string {
	scheme, rest, _ := strings.Cut(dsn, "://")
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	userinfo, hosts := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hosts = authority[:i+1], authority[i+1:]
	}
	if hosts == "" || strings.Contains(hosts, hostListStandIn) {
		return redactURL(dsn)
	}
	out := redactURL(scheme + "://" + userinfo + hostListStandIn + tail)
	if !strings.Contains(out, "://") || strings.Contains(out, "(DSN not shown") {
		return out
	}
	return strings.Replace(out, hostListStandIn, hosts, 1)
}

// redactURL is Redact for a DSN that is a URL.
func redactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Opaque != "" || u.Scheme == "" || u.Host == "" {
		if i := strings.Index(dsn, "://"); i > 0 && i < 16 && err != nil {
			return dsn[:i+3] + "(DSN not shown: unparsable)"
		}
		return "(DSN not shown)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Mask)
	}
	if q := u.Query(); len(q) > 0 {
		changed := false
		for k := range q {
			if secretParam(k) {
				q.Set(k, Mask)
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

var (
	// userinfoPassword finds "user:password@" in a URL or a driver DSN
	// (user:password@tcp(host)/db), well-formed or not.
	userinfoPassword = regexp.MustCompile(`:([^:@/]+)@`)
	// keyValue finds key=value in a query string or a key=value DSN.
	keyValue = regexp.MustCompile(`([A-Za-z_]+)=([^&\s]+)`)
)

// Secrets returns the secrets written in dsn, as they are written and, for
// a URL, decoded: the password of the user information ("user:pw@", found
// even in a malformed URL or a driver's own DSN form) and the values of
// secret parameters (password, sslpassword, pwd, token, …, in a query string
// or a key=value DSN). A secret may be listed more than once. It is what a
// scrubber of output must look for when the DSN itself was not redacted.
func Secrets(dsn string) []string {
	var out []string
	if u, err := url.Parse(dsn); err == nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
	}
	for _, m := range userinfoPassword.FindAllStringSubmatch(dsn, -1) {
		out = append(out, m[1])
	}
	for _, m := range keyValue.FindAllStringSubmatch(dsn, -1) {
		if secretParam(m[1]) {
			out = append(out, m[2])
		}
	}
	return out
}

// secretParam reports whether a DSN parameter named key holds a secret:
// its name contains pass, pwd, secret or token.
func secretParam(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"pass", "pwd", "secret", "token"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}
