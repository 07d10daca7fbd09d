// Package dburl knows the shape of idgen's DSNs without opening anything:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	mysql://user:pass@host:3306/db
//	sqlite:path/to/idgen.db
//	etcd://user:pass@host1:2379,host2:2379,host3:2379/prefix   (etcds:// for TLS)
//
// It decides which database a DSN names (DialectOf), whether the drivers
// agree on where its password is (Check), what may be shown (Redact) and
// what is secret (Secrets), importing no driver. Not net/url: it ends the
// user info at the last '@' where pgx ends it at the first, and its
// Redacted leaves ?password= in clear.
package dburl

import (
	"errors"
	"net/url"
	"regexp"
	"strconv"
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

// DialectOf returns dsn's dialect by its scheme, or "".
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

// ErrNotEncoded is returned by Check for a URL DSN with an unencoded '@'
// besides the one before the host.
var ErrNotEncoded = errors.New("the DSN holds an '@' that is not percent-encoded: write an '@' in a user name, password, " +
	"database name or parameter as %40 (and a '/', '?' or '#' in a user name or password as %2F, %3F or %23)")

// Check refuses, with ErrNotEncoded, a URL DSN the drivers could split
// differently: one with an '@' other than a single one between user info
// and host. pgx ends the user info at the first '@', net/url and etcd at
// the last, so postgres://alice:abc@tail@host/db would reach "tail@host".
// After Check all agree and Redact masks the right password. sqlite: DSNs
// are never refused.
func Check(dsn string) error {
	if DialectOf(dsn) == SQLite {
		return nil
	}
	_, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return nil // not a URL: no store takes it
	}
	at := strings.IndexByte(rest, '@')
	if at < 0 {
		return nil
	}
	if strings.LastIndexByte(rest, '@') != at || strings.ContainsAny(rest[:at], "/?#") {
		return ErrNotEncoded
	}
	return nil
}

// Redact returns dsn fit for a log or error: a URL with its password and
// secret parameters masked, a sqlite: DSN unchanged, anything else (not a
// URL, refused by Check, malformed hosts) a placeholder. Parameters also
// split at ';' and '#' and are judged by their decoded name.
func Redact(dsn string) string {
	if DialectOf(dsn) == SQLite {
		return dsn
	}
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok || !validScheme(scheme) {
		return "(DSN not shown)"
	}
	if Check(dsn) != nil {
		return scheme + "://(DSN not shown: not percent-encoded)"
	}
	userinfo := ""
	if at := strings.IndexByte(rest, '@'); at >= 0 {
		userinfo, rest = rest[:at], rest[at+1:]
		if user, _, hasPassword := strings.Cut(userinfo, ":"); hasPassword {
			userinfo = user + ":" + Mask
		}
		userinfo += "@"
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	hosts, tail := rest[:end], rest[end:]
	if !validHosts(hosts) {
		return scheme + "://(DSN not shown: unparsable)"
	}
	if i := strings.IndexAny(tail, "?#"); i >= 0 {
		tail = tail[:i+1] + maskParams(tail[i+1:])
	}
	return scheme + "://" + userinfo + hosts + tail
}

// validScheme reports whether s is a URL scheme of at most 15 characters.
func validScheme(s string) bool {
	if s == "" || len(s) > 15 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

// validHosts reports whether hosts is a comma-separated list of host,
// host:port or [IPv6]:port with a numeric port; a password where a host
// belongs makes a non-numeric port and is not shown.
func validHosts(hosts string) bool {
	if hosts == "" {
		return true
	}
	for _, h := range strings.Split(hosts, ",") {
		var port string
		if strings.HasPrefix(h, "[") {
			end := strings.IndexByte(h, ']')
			if end < 0 {
				return false
			}
			rest := h[end+1:]
			if rest != "" && rest[0] != ':' {
				return false
			}
			port = strings.TrimPrefix(rest, ":")
		} else {
			var name string
			name, port, _ = strings.Cut(h, ":")
			if strings.ContainsAny(name, "[]: ") {
				return false
			}
		}
		if strings.Trim(port, "0123456789") != "" {
			return false
		}
	}
	return true
}

// maskParams masks the value of every secret parameter in query.
func maskParams(query string) string {
	var b strings.Builder
	for query != "" {
		i := strings.IndexAny(query, "&;#")
		pair, sep := query, ""
		if i >= 0 {
			pair, sep, query = query[:i], query[i:i+1], query[i+1:]
		} else {
			query = ""
		}
		if key, _, hasValue := strings.Cut(pair, "="); hasValue && secretParam(decodeLenient(key)) {
			pair = key + "=" + Mask
		}
		b.WriteString(pair + sep)
	}
	return b.String()
}

// decodeLenient percent-decodes s where it can and turns '+' into a space,
// so a name is recognised however a driver decodes it.
func decodeLenient(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		if s[i] == '+' {
			b.WriteByte(' ')
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var (
	// userinfoPassword finds "user:password@" in a URL or driver DSN.
	userinfoPassword = regexp.MustCompile(`:([^:@/]+)@`)
	// keyValue finds key=value in a query string or a key=value DSN.
	keyValue = regexp.MustCompile(`([A-Za-z_]+)=([^&\s]+)`)
)

// Secrets returns the secrets written in dsn, as written and (for a URL)
// decoded: the user info's password, even in a malformed or driver-form
// DSN, and secret parameters' values. For scrubbing unredacted output.
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

// secretParam reports whether parameter key holds a secret (contains
// pass, pwd, secret or token).
func secretParam(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"pass", "pwd", "secret", "token"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}
