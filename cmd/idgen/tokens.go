package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
)

const tokensHelp = `Make the tokens of idgen's callers (idgen serve --tokens-file). A tokens file
has one line per caller, NAME SCOPES SHA256HEX:

  orders-api ids,leases 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae

NAME is 1 to 64 characters of a-z, 0-9, '_', '.' and '-', starting with a
letter or digit; SCOPES a comma-separated list of ids (GET /ids), leases (the
lease API, /v1/leases) and admin (/admin/). The file holds the SHA-256 of each
secret, never the secret.

  hash   read a secret from standard input (one line) and print its SHA-256,
         for the third field of a line
  new    make a random secret for caller NAME with SCOPES, and print it (once:
         it is not kept anywhere) with the line to add to the tokens file
`

// maxSecretLen bounds a secret read by idgen tokens hash.
const maxSecretLen = 4096

// secretBytes is a new secret's randomness: 256 bits.
const secretBytes = 32

func runTokens(ctx context.Context, args []string, e env) error {
	return runSub(ctx, "tokens", args, e, []subcommand{{"hash", tokensHash}, {"new", tokensNew}})
}

// tokensHash is idgen tokens hash; the secret comes on stdin, out of shell
// history and the process list.
func tokensHash(_ context.Context, args []string, e env) error {
	const cmd = "tokens hash"
	f := newSettings(cmd)
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		// Not shown: it may be the secret, given where it does not belong.
		return usagef(cmd, "unexpected argument: give the secret on standard input, not as an argument")
	}
	data, err := io.ReadAll(io.LimitReader(e.stdin, maxSecretLen+3))
	if err != nil {
		return fmt.Errorf("read the secret from standard input: %w", err)
	}
	secret := bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r"))
	switch {
	case len(secret) == 0:
		return usagef(cmd, "no secret on standard input")
	case len(secret) > maxSecretLen:
		return usagef(cmd, "secret longer than %d bytes", maxSecretLen)
	case !bearerSafe(secret):
		return usagef(cmd, "the secret must be one line of printable ASCII without spaces: it is sent as Authorization: Bearer <secret>")
	}
	fmt.Fprintln(e.stdout, idgen.HashSecret(string(secret)))
	return nil
}

// bearerSafe reports whether secret is ASCII 0x21 to 0x7e.
func bearerSafe(secret []byte) bool {
	for _, c := range secret {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// tokensNew is idgen tokens new NAME SCOPES.
func tokensNew(_ context.Context, args []string, e env) error {
	const cmd = "tokens new"
	f := newSettings(cmd)
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef(cmd, "want NAME SCOPES, e.g. orders-api ids,leases")
	}
	name := pos[0]
	switch {
	case !idgen.ValidTokenName(name):
		return usagef(cmd, "invalid NAME %q: want 1 to %d characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit",
			name, allocator.MaxNameLen)
	case name == idgen.AdminTokenName:
		return usagef(cmd, "invalid NAME: %s is reserved for the --admin-token credential", name)
	}
	scopes, err := idgen.ParseScopes(pos[1])
	if err != nil {
		return usagef(cmd, "invalid SCOPES: %v", err)
	}
	raw := make([]byte, secretBytes)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("make a secret: %w", err)
	}
	secret := base64.RawURLEncoding.EncodeToString(raw)
	fmt.Fprintf(e.stdout, "secret: %s\nline:   %s %s %s\n", secret, name, scopes, idgen.HashSecret(secret))
	fmt.Fprintf(e.stderr, "The secret is shown only now: hand it to the caller, who sends it as\n"+
		"Authorization: Bearer <secret>. Add the line to the tokens file: idgen serve\n"+
		"picks it up within seconds, or at once on SIGHUP.\n")
	return nil
}
