package etcd

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// memberSet gives each try of a retried operation one member's client and
// keeps operations on one member while it answers. The main client's
// round-robin would send every third request to a paused or cut-off member
// until gRPC's keepalive drops it, stalling nearly every heartbeat; here a
// try that got no answer or found no leader moves the preference to the
// next member. Member clients connect in the background so a down member
// does not hold up Open; until any connects, tries use the main client.
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

// memberRetry is how often unconnected members are tried again.
const memberRetry = 2 * time.Second

// newMemberSet returns the member clients of base's endpoints and starts
// their connector (close stops it). With one endpoint every try uses main.
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

// connect connects every member without a client, retrying every
// memberRetry until all have one or close.
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

// pick returns the preferred or next connected member's client, or the
// main client (index -1) while none is connected.
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

// size returns how many members a try can go to (1 for nil or one endpoint).
func (m *memberSet) size() int {
	if m == nil || len(m.cfgs) == 0 {
		return 1
	}
	return len(m.cfgs)
}

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

// avoid moves the preference away from member i after a failed try.
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

// Leader preference. When nodes race one record, the node whose member
// leads wins every round and the others starve (docs/benchmarks.md), so
// after a lost compare followLeader prefers the leader.
const (
	// leaderCheckEvery bounds how often followLeader asks for the leader.
	leaderCheckEvery = time.Second
	// leaderAvoidFor is how long an avoided member is not preferred as
	// leader: a paused leader stays leader to its followers until an election.
	leaderAvoidFor = 10 * time.Second
	// leaderCheckTimeout bounds each status request of followLeader.
	leaderCheckTimeout = 500 * time.Millisecond
)

// followLeader prefers the leader, asking at most once per
// leaderCheckEvery; on any error the preference stays. Nil-safe.
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

// status asks member i for the leader's ID and its own, recording the latter.
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
