package testkit

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// SecureEtcd is a one-member etcd cluster that serves clients over TLS only,
// requires a client certificate signed by its CA, and has authentication
// enabled, for the tests of those DSN options.
type SecureEtcd struct {
	Endpoint string // host:port of the client URL
	CAFile   string // PEM of the CA that signed the member's and the client's certificates
	CertFile string // client certificate
	KeyFile  string // client key
	User     string // "root"
	Password string
}

// DSN returns an etcds:// DSN for the secure cluster with prefix.
func (s *SecureEtcd) DSN(prefix string) string {
	q := url.Values{"ca_file": {s.CAFile}, "cert_file": {s.CertFile}, "key_file": {s.KeyFile}}
	return fmt.Sprintf("etcds://%s@%s/%s?%s", url.UserPassword(s.User, s.Password).String(), s.Endpoint, prefix, q.Encode())
}

// StartSecureEtcd starts a secure one-member cluster for tb, with a root user
// whose password is password, and stops it when tb ends. It skips or fails
// tb like DSN when no etcd binary can be had (a cluster named by
// IDGEN_TEST_ETCD_DSN is no use here).
func StartSecureEtcd(tb testing.TB, password string) *SecureEtcd {
	tb.Helper()
	bin, err := binary()
	if err != nil {
		etcdUnavailable(tb, err)
	}
	dir := tb.TempDir()
	caCert, caKey := newCert(tb, dir, "ca", nil, nil)
	newCert(tb, dir, "server", caCert, caKey)
	newCert(tb, dir, "client", caCert, caKey)
	ports, err := freePorts(2)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	s := &SecureEtcd{
		Endpoint: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"),
		KeyFile:  filepath.Join(dir, "client-key.pem"),
		User:     "root",
		Password: password,
	}
	client := "https://" + s.Endpoint
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	cmd := exec.Command(bin,
		"--name", "secure", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "secure="+peer,
		"--cert-file", filepath.Join(dir, "server.pem"), "--key-file", filepath.Join(dir, "server-key.pem"),
		"--trusted-ca-file", s.CAFile, "--client-cert-auth",
		"--log-level", "warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("etcdtest: start %s: %v", bin, err)
	}
	doneC := make(chan struct{})
	go func() { _ = cmd.Wait(); close(doneC) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-doneC
		_ = logf.Close()
	})

	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		_, err = cli.UserAdd(ctx, s.User, s.Password)
		if err == nil {
			break
		}
		select {
		case <-doneC:
			log, _ := os.ReadFile(logf.Name())
			tb.Fatalf("etcdtest: secure member exited: %v\n%s", err, log)
		case <-ctx.Done():
			tb.Fatalf("etcdtest: secure member did not answer: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := cli.UserGrantRole(ctx, s.User, "root"); err != nil {
		tb.Fatalf("etcdtest: grant root: %v", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		tb.Fatalf("etcdtest: enable auth: %v", err)
	}
	return s
}

// newCert writes <name>.pem and <name>-key.pem into dir: a CA when parent
// is nil, else a certificate for 127.0.0.1 and localhost signed by parent.
func newCert(tb testing.TB, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("etcdtest: key: %v", err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "idgen-etcdtest-" + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		tb.Fatalf("etcdtest: certificate: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatalf("etcdtest: key: %v", err)
	}
	write := func(file, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			tb.Fatalf("etcdtest: %v", err)
		}
	}
	write(name+".pem", "CERTIFICATE", der)
	write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	return cert, key
}
