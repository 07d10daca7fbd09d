package etcd

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// memberSet gives the retried operations (claims, heartbeats, releases,
// fetches: see retry) a client of one member each, and keeps them on one
// member while it answers.
//
// The store's main client balances its requests over the members
// round-robin, request by request. That is right for a member that is down
// (its connection fails at once and leaves the rotation), and wrong for one
// that is paused or cut off by a network that drops everything: its
// connection stays up until gRPC's keepalive gives up on it, seconds later,
// and meanwhile every third request waits for an answer that never comes.
// A heartbeat makes three or four requests, so nearly every heartbeat would
// wait. Here each try of an operation makes all its requests to one member,
// the preferred one; a try that got no answer, or found the member without
// a leader, moves the preference to the next member, and the operations
// stay there.
//
// The member clients are connected in the background, so that a member
// that is down when the store opens does not hold up Open; until a member
// has a client, tries skip it, and until any has, they use the main client.
type memberSet struct {
	main *clientv3.Client
	cfgs []clientv3.Config // one per member, Endpoints of one

	// mu guards clis, pref, ids, avoided and checked.
	mu      sync.Mutex
	clis    []*clientv3.Client // nil until connected
	pref    int                // the preferred member
	ids     []uint64           // the members' IDs, 0 until learned
	avoided []time.Time        // when avoid last moved away from each member
	checked time.Time          // when followLeader last asked for the leader
	now     func() time.Time   // the node's clock; a seam for tests

	ctx   context.Context // the member clients' lifetime; cancelled by close
	stop  context.CancelFunc
	doneC chan struct{} // closed when the connector has returned
}

// memberRetry is how often the connector tries again to connect the
// members it could not connect yet.
const memberRetry = 2 * time.Second

// newMemberSet returns the member clients of the endpoints of base, and
// starts the connector that connects them; close stops it. With a single
// endpoint there is nothing to choose from: every try uses main.
func newMemberSet(base clientv3.Config, main *clientv3.Client) *memberSet {
	m := &memberSet{main: main, doneC: make(chan struct{}), now: time.Now}
	m.ctx, m.stop = context.WithCancel(context.Background())
	if len(base.Endpoints) < 2 {
		close(m.doneC)
		return m
	}
	for _, ep := range base.Endpoints {
		cfg := base
		cfg.Endpoints = []string{ep}
		m.cfgs = append(m.cfgs, cfg)
	}
	m.clis = make([]*clientv3.Client, len(m.cfgs))
	m.ids = make([]uint64, len(m.cfgs))
	m.avoided = make([]time.Time, len(m.cfgs))
	m.pref = rand.IntN(len(m.cfgs)) // spread the nodes over the members
	go m.connect()
	return m
}

// connect connects every member that has no client yet, then again every
// memberRetry for those it could not, until all have one or close.
func (m *memberSet) connect() {
	defer close(m.doneC)
	for {
		missing := 0
		for i, cfg := range m.cfgs {
			m.mu.Lock()
			have := m.clis[i] != nil
			m.mu.Unlock()
			if have {
				continue
			}
			cfg.Context = m.ctx
			cli, err := clientv3.New(cfg)
			if err != nil {
				missing++
				continue
			}
			m.mu.Lock()
			m.clis[i] = cli
			m.mu.Unlock()
		}
		if missing == 0 {
			return
		}
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(memberRetry):
		}
	}
}

// pick returns the client a try uses: the preferred member's, or the next
// connected one's; the main client (index -1) while none is connected.
func (m *memberSet) pick() (int, *clientv3.Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.clis {
		i := (m.pref + k) % len(m.clis)
		if m.clis[i] != nil {
			return i, m.clis[i]
		}
	}
	return -1, m.main
}

// size returns how many members a try can be sent to: 1 for a nil set or
// a single endpoint.
func (m *memberSet) size() int {
	if m == nil || len(m.cfgs) == 0 {
		return 1
	}
	return len(m.cfgs)
}

// connected reports whether every member has a client.
func (m *memberSet) connected() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cli := range m.clis {
		if cli == nil {
			return false
		}
	}
	return true
}

// avoid moves the preference away from member i, after a try on it got no
// answer or found it without a leader. It may be called on a nil set.
func (m *memberSet) avoid(i int) {
	if m == nil || i < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.avoided[i] = m.now()
	if m.pref == i {
		m.pref = (i + 1) % len(m.clis)
	}
}

// Leader preference. Every write goes through the Raft leader; a member
// that is not the leader forwards it, one hop more. When nodes race one
// record (the strict fetches of a namespace, every one a compare-and-swap),
// the node whose preferred member is the leader gets its compare in first,
// round after round, and the others starve (docs/benchmarks.md, "strict
// numbering"). So after a try lost a compare, followLeader moves the
// preference to the leader: then the nodes that contend all reach it at
// the same distance.
const (
	// leaderCheckEvery bounds how often followLeader asks for the leader.
	leaderCheckEvery = time.Second
	// leaderAvoidFor is how long a member that avoid moved away from (no
	// answer, no leader) is not preferred again as the leader: a paused
	// leader stays the leader in its followers' eyes until they elect
	// another.
	leaderAvoidFor = 10 * time.Second
	// leaderCheckTimeout bounds each status request of followLeader.
	leaderCheckTimeout = 500 * time.Millisecond
)

// followLeader makes the leader the preferred member, at most once every
// leaderCheckEvery; it asks the preferred member which one leads, and the
// others their IDs the first time it needs them. It gives up quietly on any
// error: the preference then stays as it was. It may be called on a nil set.
func (m *memberSet) followLeader(ctx context.Context) {
	if m == nil || len(m.cfgs) < 2 {
		return
	}
	now := m.now()
	m.mu.Lock()
	if now.Sub(m.checked) < leaderCheckEvery {
		m.mu.Unlock()
		return
	}
	m.checked = now
	pref, cli := m.pref, m.clis[m.pref]
	m.mu.Unlock()
	if cli == nil {
		return
	}
	leader, self, ok := m.status(ctx, pref, cli)
	if !ok || leader == 0 || leader == self {
		return
	}
	for i := range m.cfgs {
		m.mu.Lock()
		id, c := m.ids[i], m.clis[i]
		m.mu.Unlock()
		if id == 0 && c != nil {
			_, id, _ = m.status(ctx, i, c)
		}
		if id != leader {
			continue
		}
		m.mu.Lock()
		if now.Sub(m.avoided[i]) >= leaderAvoidFor {
			m.pref = i
		}
		m.mu.Unlock()
		return
	}
}

// status asks member i for its status: the leader's ID and its own. It
// records the member's ID.
func (m *memberSet) status(ctx context.Context, i int, cli *clientv3.Client) (leader, self uint64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, leaderCheckTimeout)
	defer cancel()
	resp, err := cli.Status(ctx, m.cfgs[i].Endpoints[0])
	if err != nil || resp.Header == nil {
		return 0, 0, false
	}
	m.mu.Lock()
	m.ids[i] = resp.Header.MemberId
	m.mu.Unlock()
	return resp.Leader, resp.Header.MemberId, true
}

// close stops the connector, waits for it, and closes the member clients.
func (m *memberSet) close() {
	m.stop()
	<-m.doneC
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, cli := range m.clis {
		if cli != nil {
			_ = cli.Close()
			m.clis[i] = nil
		}
	}
}
