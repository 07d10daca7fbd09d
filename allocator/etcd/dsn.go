package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/idgen-project/idgen/internal/dburl"
)

// DSN parameters. Others are refused, so a misspelt TLS option cannot
// leave a connection in plain text.
const (
	paramCAFile      = "ca_file"      // PEM bundle of the CAs that sign the members' certificates; implies TLS
	paramCertFile    = "cert_file"    // client certificate (PEM), with key_file; implies TLS
	paramKeyFile     = "key_file"     // client private key (PEM), with cert_file
	paramServerName  = "server_name"  // name to verify the members' certificates against
	paramDialTimeout = "dial_timeout" // how long Open waits for a first connection (default 5s)
	paramTimeURLs    = "time_urls"    // comma-separated http(s):// URLs whose Date header gives member time
)

const (
	defaultPort        = "2379"
	defaultPrefix      = "idgen"
	defaultDialTimeout = 5 * time.Second
)

type config struct {
	endpoints   []string // host:port of each member
	tls         *tls.Config
	username    string
	password    string
	prefix      string // key prefix, "/<path>/"
	dialTimeout time.Duration
	timeURLs    []string // where member time is read; default: each endpoint's /version
}

// redact returns dsn with its password and secrets masked.
func redact(dsn string) string { return dburl.Redact(dsn) }

// parseDSN parses etcd://[user[:password]@]host[:port][,…][/prefix][?params]
// (etcds:// for TLS) and reads the certificate files it names. Errors never
// contain the password.
func parseDSN(dsn string) (config, error) {
	var (
		cfg    config
		useTLS bool
	)
	rest, ok := strings.CutPrefix(dsn, "etcd://")
	if !ok {
		if rest, ok = strings.CutPrefix(dsn, "etcds://"); !ok {
			return config{}, errors.New("not an etcd:// or etcds:// URL")
		}
		useTLS = true
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo := authority[:i]
		authority = authority[i+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		var err error
		if cfg.username, err = url.PathUnescape(user); err != nil || cfg.username == "" {
			return config{}, errors.New("malformed user name")
		}
		if hasPass {
			if cfg.password, err = url.PathUnescape(pass); err != nil {
				return config{}, errors.New("malformed password (percent-encode special characters)")
			}
		}
	}
	if authority == "" {
		return config{}, errors.New("no endpoint: want etcd://host:2379,host:2379/prefix")
	}
	for _, ep := range strings.Split(authority, ",") {
		if ep == "" {
			return config{}, errors.New("empty endpoint in the host list")
		}
		host, port, err := net.SplitHostPort(ep)
		if err != nil {
			// No port: the default one. A bare IPv6 address needs brackets.
			host, port = strings.Trim(ep, "[]"), defaultPort
			if strings.ContainsAny(host, "[]/") {
				return config{}, fmt.Errorf("malformed endpoint %q", ep)
			}
		}
		if host == "" || port == "" || strings.ContainsAny(host, " /") {
			return config{}, fmt.Errorf("malformed endpoint %q", ep)
		}
		cfg.endpoints = append(cfg.endpoints, net.JoinHostPort(host, port))
	}

	path, err := url.PathUnescape(strings.Trim(path, "/"))
	if err != nil {
		return config{}, errors.New("malformed key prefix")
	}
	if path == "" {
		path = defaultPrefix
	}
	cfg.prefix = "/" + path + "/"

	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return config{}, errors.New("malformed parameters")
	}
	cfg.dialTimeout = defaultDialTimeout
	var caFile, certFile, keyFile, serverName string
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case paramCAFile:
			caFile = v
		case paramCertFile:
			certFile = v
		case paramKeyFile:
			keyFile = v
		case paramServerName:
			serverName = v
		case paramDialTimeout:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return config{}, fmt.Errorf("%s=%q: want a positive duration such as 5s", k, v)
			}
			cfg.dialTimeout = d
		case paramTimeURLs:
			for _, u := range strings.Split(v, ",") {
				pu, err := url.Parse(u)
				if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.User != nil {
					return config{}, fmt.Errorf("%s: %q is not an http:// or https:// URL without user", k, u)
				}
				cfg.timeURLs = append(cfg.timeURLs, u)
			}
		default:
			return config{}, fmt.Errorf("unknown parameter %q (want %s, %s, %s, %s, %s or %s)", k,
				paramCAFile, paramCertFile, paramKeyFile, paramServerName, paramDialTimeout, paramTimeURLs)
		}
	}
	if caFile != "" || certFile != "" || keyFile != "" || serverName != "" {
		useTLS = true
	}
	if (certFile == "") != (keyFile == "") {
		return config{}, fmt.Errorf("%s and %s go together", paramCertFile, paramKeyFile)
	}
	if useTLS {
		t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return config{}, fmt.Errorf("%s: %w", paramCAFile, err)
			}
			t.RootCAs = x509.NewCertPool()
			if !t.RootCAs.AppendCertsFromPEM(pem) {
				return config{}, fmt.Errorf("%s %s holds no PEM certificate", paramCAFile, caFile)
			}
		}
		if certFile != "" {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return config{}, fmt.Errorf("%s/%s: %w", paramCertFile, paramKeyFile, err)
			}
			t.Certificates = []tls.Certificate{cert}
		}
		cfg.tls = t
	}
	if len(cfg.timeURLs) == 0 {
		scheme := "http"
		if useTLS {
			scheme = "https"
		}
		for _, ep := range cfg.endpoints {
			cfg.timeURLs = append(cfg.timeURLs, scheme+"://"+ep+"/version")
		}
	}
	return cfg, nil
}
