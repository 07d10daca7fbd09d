package allocator

import (
	"net/url"
	"strings"
)

// RedactDSN returns dsn fit for a log line or an error message: a URL with
// its password, and any password-like query parameter, replaced by "xxxxx";
// a sqlite: path unchanged; anything else (opaque or unparsable) reduced to
// a placeholder, since it may hold a password in a form not recognised.
func RedactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Opaque != "" || u.Scheme == "" || u.Host == "" {
		if i := strings.Index(dsn, "://"); i > 0 && i < 16 && err != nil {
			return dsn[:i+3] + "(DSN not shown: unparsable)"
		}
		return "(DSN not shown)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if q := u.Query(); len(q) > 0 {
		changed := false
		for k := range q {
			if l := strings.ToLower(k); strings.Contains(l, "pass") || strings.Contains(l, "secret") || strings.Contains(l, "token") {
				q.Set(k, "xxxxx")
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}
