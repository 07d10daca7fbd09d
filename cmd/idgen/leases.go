package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"strconv"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/stores"
)

// The idgen leases subcommands besides the table: the audit trail and
// evictions, direct on the database as operator "cli:<os user>".

const leasesEventsHelp = `Print the lease events (the lease table's audit trail), oldest first: the
claims (acquire, takeover), releases, lost leases and evictions, with the
caller each was recorded for (OWNER) and the request that caused it. A page
holds --limit events; the line after it gives the --after of the next page.

Flags (environment variable in brackets):
  --after N          only events with an ID above N (default 0)
  --limit N          events per page, 1 to 1000 (default 100)
  --datacenter N     only this datacenter
  --worker N         only this worker ID
  --holder S         only events naming this holder
  --owner S          only events recorded for this caller
  --kind K           only acquire, takeover, release, lost, evict or fence events
  --since TIME       only events at or after TIME (RFC 3339)
  --until TIME       only events before TIME (RFC 3339)
  --dsn DSN          database [IDGEN_DSN] (default sqlite:idgen.db)
`

const leasesEvictHelp = `Take the lease of worker ID WORKER of datacenter DC from its holder: its
fencing version goes up, so the holder's next heartbeat fails and it stops
issuing. The timestamp ceiling stays: the next holder starts above every
timestamp the evicted one may have used. The eviction is recorded as an evict
lease event naming you (cli:<user>) and the reason. A lease nobody holds is
refused.

Flags (environment variable in brackets):
  --reason TEXT        why, recorded in the event (at most 1024 bytes)
  --fencing-version N  evict only if the lease is still at version N
  --dsn DSN            database [IDGEN_DSN] (default sqlite:idgen.db)
`

// cliOwner is the CLI's caller name: "cli:" and the user.
func cliOwner(e env) string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = e.getenv("USER")
	}
	if name == "" {
		name = "unknown"
	}
	owner := "cli:" + name
	return owner[:min(len(owner), allocator.MaxOwnerLen)]
}

// cliRequestID makes a request ID for one command.
func cliRequestID() string {
	return fmt.Sprintf("cli-%016x%016x", rand.Uint64(), rand.Uint64())
}

// optInt64 is an integer flag that may be left out.
type optInt64 struct {
	v   int64
	set bool
}

func (o *optInt64) String() string {
	if !o.set {
		return ""
	}
	return strconv.FormatInt(o.v, 10)
}

func (o *optInt64) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return errors.New("want a non-negative integer")
	}
	o.v, o.set = v, true
	return nil
}

func leasesEvents(ctx context.Context, args []string, e env) error {
	const cmd = "leases events"
	f := newAdminFlags(cmd)
	fs := f.fs
	var after, datacenter, worker optInt64
	fs.Var(&after, "after", "")
	fs.Var(&datacenter, "datacenter", "")
	fs.Var(&worker, "worker", "")
	limit := fs.Int("limit", httpapi.DefaultEventsLimit, "")
	holder := fs.String("holder", "", "")
	owner := fs.String("owner", "", "")
	kind := fs.String("kind", "", "")
	var since, until timeFlag
	fs.Var(&since, "since", "")
	fs.Var(&until, "until", "")
	for _, name := range []string{"after", "limit", "datacenter", "worker", "holder", "owner", "kind", "since", "until"} {
		f.noEnv[name] = true // a query, not a setting of the environment
	}
	var filter allocator.LeaseEventFilter
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if err := noArgs(cmd, pos, "events takes flags only"); err != nil {
			return err
		}
		if *limit < 1 || *limit > httpapi.MaxEventsLimit {
			return usagef(cmd, "invalid --limit %d: want 1 to %d", *limit, httpapi.MaxEventsLimit)
		}
		filter = allocator.LeaseEventFilter{
			AfterID: after.v,
			Limit:   *limit + 1, // one more tells whether there is a next page
			Holder:  *holder,
			Owner:   *owner,
			Kind:    allocator.EventKind(*kind),
			Since:   since.t,
			Until:   until.t,
		}
		if datacenter.set {
			filter.DatacenterID = &datacenter.v
		}
		if worker.set {
			filter.WorkerID = &worker.v
		}
		if *kind != "" && filter.Kind.Validate() != nil {
			return usagef(cmd, "invalid --kind %q: want acquire, takeover, release, lost, evict or fence", *kind)
		}
		if err := filter.Validate(); err != nil {
			return usagef(cmd, "%v", err)
		}
		return nil
	}, func(store stores.Store) error {
		events, err := store.ListLeaseEvents(ctx, filter)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("list lease events: %w", err))
		}
		more := len(events) > *limit
		if more {
			events = events[:*limit]
		}
		tw := newTable(e.stdout, "ID\tAT\tDC\tWORKER\tKIND\tHOLDER\tVERSION\tOWNER\tREQUEST ID\tDETAIL")
		for _, ev := range events {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", ev.ID, timeText(ev.At), ev.DatacenterID, ev.WorkerID,
				ev.Kind, orDash(ev.Holder), ev.FencingVersion, orDash(ev.Owner), orDash(ev.RequestID), ev.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if more {
			fmt.Fprintf(e.stdout, "(more events: add --after %d)\n", events[len(events)-1].ID)
		}
		return nil
	})
}

// leasesEvict is idgen leases evict DC WORKER.
func leasesEvict(ctx context.Context, args []string, e env) error {
	const cmd = "leases evict"
	f := newAdminFlags(cmd)
	reason := f.fs.String("reason", "", "")
	var version optInt64
	f.fs.Var(&version, "fencing-version", "")
	f.noEnv["reason"], f.noEnv["fencing-version"] = true, true
	var req allocator.EvictRequest
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if len(pos) != 2 {
			return usagef(cmd, "want DC WORKER, e.g. idgen leases evict 0 7")
		}
		var key allocator.LeaseKey
		for i, dst := range []*int64{&key.DatacenterID, &key.WorkerID} {
			v, err := strconv.ParseInt(pos[i], 10, 64)
			if err != nil || v < 0 {
				return usagef(cmd, "invalid %s %q: want a non-negative integer", []string{"DC", "WORKER"}[i], pos[i])
			}
			*dst = v
		}
		if version.set && version.v == 0 {
			return usagef(cmd, "invalid --fencing-version 0: want 1 or more")
		}
		req = allocator.EvictRequest{Key: key, FencingVersion: version.v, Owner: cliOwner(e), RequestID: cliRequestID(), Reason: *reason}
		if err := req.Validate(); err != nil {
			return usagef(cmd, "%v", err)
		}
		return nil
	}, func(store stores.Store) error {
		key := req.Key
		lease, err := store.Evict(ctx, req)
		switch {
		case errors.Is(err, allocator.ErrLeaseNotHeld):
			return fmt.Errorf("nothing to evict: %w", err)
		case errors.Is(err, allocator.ErrLeaseLost):
			return fmt.Errorf("not evicted, the lease moved on: %w", err)
		case err != nil:
			return withSchemaHint(ctx, store, fmt.Errorf("evict worker %d/%d: %w", key.DatacenterID, key.WorkerID, err))
		}
		fmt.Fprintf(e.stdout, "evicted worker %d/%d: fencing version now %d, ceiling %s kept (owner %s, request ID %s)\n",
			key.DatacenterID, key.WorkerID, lease.FencingVersion, msText(lease.CeilingMS), req.Owner, req.RequestID)
		return nil
	})
}

// hostname is the host's name for audit lines, "" when unknown.
func hostname() string {
	h, _ := os.Hostname()
	return h
}
