package netlab

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/api"
)

// The NAT lab:
//
//	            public segment 192.0.0.128/25 (bridge br0 in namespace sw)
//	  r1 .131 ──┬── r2 .132 ──┬── gwA wan .141 ──┬── gwB wan .142
//	            │              │        │ nft masquerade │ nft masquerade
//	                              a 10.0.1.2/24     b 10.0.2.2/24
//
// r1 and r2 are relay daemons (relay service and mailboxes); a and b are
// daemons behind the NAT routers gwA and gwB, which reserve slots on the
// relays. A router's NAT is either endpoint-independent ("eim": nftables
// masquerade, which keeps the source port when it is free, so every
// connection from one socket leaves from the same public address and
// port) or symmetric ("sym": masquerade fully-random, a new random port for
// every connection). Both filter like a home router: from the public side
// only packets of connections the LAN side opened pass (ct state
// established,related), so a direct connection between a and b exists
// only if hole punching opened it; and unsolicited packets to the router
// itself are dropped silently, not answered with a reset (a reset to the
// first SYN of a TCP hole punch ends it at once: "connection refused").

const (
	pubR1  = "192.0.0.131"
	pubR2  = "192.0.0.132"
	pubGwA = "192.0.0.141"
	pubGwB = "192.0.0.142"
)

type natLab struct {
	*Lab
	dir            string
	sw, gwA, gwB   string
	nsA, nsB       string
	r1, r2         *Daemon
	nsR1, nsR2     string
	typeA, typeB   string
	port           int // the next listen port for a and b (fresh conntrack tuples per attempt)
	r1Addr, r2Addr string
}

func newNATLab(t *testing.T) *natLab {
	l := &natLab{Lab: NewLab(t), dir: t.TempDir(), port: 5001}
	ns := l.NS("sw", "r1", "r2", "gwA", "gwB", "a", "b")
	l.sw, l.nsR1, l.nsR2, l.gwA, l.gwB, l.nsA, l.nsB = ns[0], ns[1], ns[2], ns[3], ns[4], ns[5], ns[6]
	l.Bridge(l.sw, "br0")
	l.Plug(l.sw, "br0", "p-r1", l.nsR1, "eth0", []string{pubR1 + "/25"}, "")
	l.Plug(l.sw, "br0", "p-r2", l.nsR2, "eth0", []string{pubR2 + "/25"}, "")
	l.Plug(l.sw, "br0", "p-gwA", l.gwA, "wan", []string{pubGwA + "/25"}, "")
	l.Plug(l.sw, "br0", "p-gwB", l.gwB, "wan", []string{pubGwB + "/25"}, "")
	l.Wire(l.gwA, "lan", []string{"10.0.1.1/24"}, l.nsA, "eth0", []string{"10.0.1.2/24"})
	l.Wire(l.gwB, "lan", []string{"10.0.2.1/24"}, l.nsB, "eth0", []string{"10.0.2.2/24"})
	l.IP(l.nsA, "route add default via 10.0.1.1\n")
	l.IP(l.nsB, "route add default via 10.0.2.1\n")
	for _, gw := range []string{l.gwA, l.gwB} {
		l.Sysctl(gw, "net.ipv4.ip_forward", "1")
	}
	l.setNAT("eim", "eim")

	relay := func(name, ns string) *Daemon {
		return NewDaemon(t, l.dir, name, ns, Config{RelayService: true, Display: name})
	}
	l.r1, l.r2 = relay("r1", l.nsR1), relay("r2", l.nsR2)
	ctx := context.Background()
	l.r1.Start(ctx)
	l.r2.Start(ctx)
	l.r1Addr = "/ip4/" + pubR1 + "/tcp/4817/p2p/" + l.r1.PeerID()
	l.r2Addr = "/ip4/" + pubR2 + "/tcp/4817/p2p/" + l.r2.PeerID()
	return l
}

// setNAT loads the routers' rulesets: a NAT of the given type each, the
// stateful filter, and a counter of packets that reach the LAN from the
// other router's public address — traffic of a direct connection between
// a and b, which never passes a relay.
func (l *natLab) setNAT(typeA, typeB string) {
	l.typeA, l.typeB = typeA, typeB
	for _, r := range []struct{ ns, typ, peer string }{{l.gwA, typeA, pubGwB}, {l.gwB, typeB, pubGwA}} {
		random := ""
		if r.typ == "sym" {
			random = " fully-random"
		}
		l.NFT(r.ns, fmt.Sprintf(`flush ruleset
table ip lab {
	counter direct_in { }
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "wan" masquerade%s
	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "wan" ct state new drop
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		iifname "lan" oifname "wan" accept
		iifname "wan" oifname "lan" ct state established,related ip saddr %s counter name direct_in accept
		iifname "wan" oifname "lan" ct state established,related accept
	}
}
`, random, r.peer))
	}
}

// directPackets are the packets each side's router let in from the other
// side's router.
func (l *natLab) directPackets() (intoA, intoB uint64) {
	intoA, _ = l.Counter(l.gwA, "lab", "direct_in")
	intoB, _ = l.Counter(l.gwB, "lab", "direct_in")
	return intoA, intoB
}

// peers makes a and b with fresh listen ports, reserving on the given
// relays.
func (l *natLab) peers(t *testing.T, relays ...string) (a, b *Daemon) {
	p := l.port
	l.port++
	listen := []string{fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", p), fmt.Sprintf("/ip4/0.0.0.0/udp/%d/quic-v1", p)}
	name := fmt.Sprintf("%s-%s-%d", l.typeA, l.typeB, p)
	// Debug logs: go-libp2p's hole punching service says there, and only
	// there, when it starts (holePunchReady).
	extra := "[log]\nlevel = \"debug\"\n"
	a = NewDaemon(t, l.dir, "a-"+name, l.nsA, Config{Listen: listen, RelayUse: relays, Display: "a", Extra: extra})
	b = NewDaemon(t, l.dir, "b-"+name, l.nsB, Config{Listen: listen, RelayUse: relays, Display: "b", Extra: extra})
	return a, b
}

// waitSlots waits until d holds a slot on each relay named.
func waitSlots(ctx context.Context, t *testing.T, d *Daemon, relays ...*Daemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := Poll(ctx, 50*time.Millisecond, func() error {
		st, err := d.API().Status(ctx)
		if err != nil {
			return err
		}
		for _, r := range relays {
			if !containsStr(st.RelaySlots, r.PeerID()) {
				return fmt.Errorf("%s holds slots on %v, not yet on %s", d.Name, st.RelaySlots, r.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reservation: %v\n%s", err, d.LogTail(20))
	}
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// circuit is d's address through relay r.
func circuit(r *Daemon, relayIP string, d *Daemon) string {
	return "/ip4/" + relayIP + "/tcp/4817/p2p/" + r.PeerID() + "/p2p-circuit/p2p/" + d.PeerID()
}

// auditHas reports whether d's audit log holds a message from peer whose
// content contains token.
func auditHas(ctx context.Context, d *Daemon, peer, token string) (bool, error) {
	c := d.API()
	list, err := c.AuditConversations(ctx, peer)
	if err != nil {
		return false, err
	}
	for _, conv := range list.Conversations {
		ac, err := c.AuditEntries(ctx, conv.ID)
		if err != nil {
			return false, err
		}
		for _, e := range ac.Entries {
			b, _ := json.Marshal(e.Message)
			if e.Direction == "received" && strings.Contains(string(b), token) {
				return true, nil
			}
		}
	}
	return false, nil
}

// waitAudit waits until d has audited a message from peer containing
// token and returns how long that took.
func waitAudit(ctx context.Context, t *testing.T, d *Daemon, peer, token string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	err := Poll(ctx, 50*time.Millisecond, func() error {
		ok, err := auditHas(ctx, d, peer, token)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s has not audited %q from %s", d.Name, token, peer)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return time.Since(start)
}

// greetThroughRelay connects a to b's circuit address through relay r and
// greets b, once: a failure of either fails t. (It used to retry for 20 s
// around a first greeting refused as "unknown peer", issue 19; the cause
// is gone, issue 27, and a retry would hide its return.)
func greetThroughRelay(ctx context.Context, t *testing.T, a, b, r *Daemon, relayIP string) {
	t.Helper()
	gctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := a.API().Connect(gctx, circuit(r, relayIP, b)); err != nil {
		t.Fatalf("connecting to %s through %s: %v", b.Name, r.Name, err)
	}
	if _, err := a.API().Greet(gctx, api.GreetRequest{Peer: b.PeerID()}); err != nil {
		t.Fatalf("greeting %s through %s (the first greeting through the circuit): %v", b.Name, r.Name, err)
	}
}

// holePunchReady waits until go-libp2p's hole punching service runs on
// each daemon. It starts only once the host has a public address (its own
// or one a peer observed, here the NAT's public address the relay saw);
// until then the host does not even speak /libp2p/dcutr, and a relayed
// connection made meanwhile is never upgraded: the inbound side tries
// once, is told "protocols not supported", and does not try again on that
// connection. Nothing in the control API shows this, so the lab reads the
// daemon's debug log.
func holePunchReady(ctx context.Context, t *testing.T, ds ...*Daemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, d := range ds {
		if err := d.WaitLog(ctx, "Host now has a public address"); err != nil {
			t.Fatalf("hole punching never started: %v", err)
		}
	}
}

// attempt is one hole-punching try between a fresh a and b.
type attempt struct {
	Greet            time.Duration
	FirstGreetFailed bool // the known bug of greetThroughRelay
	Direct           bool
	ToDirect         time.Duration
}

func (a attempt) MarshalJSON() ([]byte, error) {
	type out struct {
		Greet            float64 `json:"greet_through_relay_ms"`
		FirstGreetFailed bool    `json:"first_greet_failed"`
		Direct           bool    `json:"direct"`
		ToDirect         float64 `json:"time_to_direct_ms,omitempty"`
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return json.Marshal(out{ms(a.Greet), a.FirstGreetFailed, a.Direct, ms(a.ToDirect)})
}

// directThreshold is how many packets each router must let in from the
// other side before the connection counts as direct: a TCP or QUIC
// handshake, the security handshake and identify are well above it, a
// lone packet of a failed punch is not.
const directThreshold = 10

// punch runs one attempt: b reserves on r1, a dials b's circuit through r1
// and greets it, and the lab watches the routers for a direct connection
// for at most wait.
func (l *natLab) punch(ctx context.Context, t *testing.T, wait time.Duration) attempt {
	a, b := l.peers(t, l.r1Addr)
	b.Start(ctx)
	waitSlots(ctx, t, b, l.r1)
	a.Start(ctx)
	waitSlots(ctx, t, a, l.r1)
	defer func() { a.Stop(); b.Stop() }()
	holePunchReady(ctx, t, a, b)
	a0, b0 := l.directPackets()
	start := time.Now()
	greetThroughRelay(ctx, t, a, b, l.r1, pubR1)
	res := attempt{Greet: time.Since(start)}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := Poll(wctx, 50*time.Millisecond, func() error {
		ia, ib := l.directPackets()
		if ia-a0 >= directThreshold && ib-b0 >= directThreshold {
			return nil
		}
		// b, on whose side the relayed connection arrived, runs DCUtR;
		// after its last retry nothing more will come.
		if strings.Contains(b.Log(), "all retries for hole punch") {
			return errGaveUp
		}
		return fmt.Errorf("direct packets: %d into a, %d into b", ia-a0, ib-b0)
	})
	if err == nil {
		res.Direct, res.ToDirect = true, time.Since(start)
	}
	return res
}

var errGaveUp = fmt.Errorf("hole punching: %w", ErrGiveUp)

// TestNATTraversal: per NAT pair type, N attempts of reserve, meet through
// the relay, and hole punch; the figures are success over N and time to a
// direct connection. Where both NATs are endpoint-independent the punch
// must succeed every time; where one is symmetric it cannot (the port the
// other side learns is not the one the next connection leaves from), and
// the conversation must still work through the relay.
func TestNATTraversal(t *testing.T) {
	l := newNATLab(t)
	ctx := context.Background()
	// A failed punch costs DCUtR's three tries of 5 s each (the NAT drops
	// the SYNs silently), so the short form tries symmetric pairs twice.
	wait := 30 * time.Second
	attempts := map[string]int{"eim/eim": 3, "eim/sym": 2, "sym/sym": 2}
	if Long() {
		attempts = map[string]int{"eim/eim": 10, "eim/sym": 10, "sym/sym": 10}
	}
	type pairFigures struct {
		Pair             string      `json:"pair"`
		Attempts         int         `json:"attempts"`
		Direct           int         `json:"direct"`
		ToDirect         Percentiles `json:"time_to_direct"`
		Greet            Percentiles `json:"greet_through_relay"`
		FirstGreetFailed int         `json:"first_greet_failed"`
		Each             []attempt   `json:"each"`
	}
	var all []pairFigures
	for _, pair := range [][2]string{{"eim", "eim"}, {"eim", "sym"}, {"sym", "sym"}} {
		l.setNAT(pair[0], pair[1])
		f := pairFigures{Pair: pair[0] + "/" + pair[1]}
		n := attempts[f.Pair]
		f.Attempts = n
		var to, gr []time.Duration
		for range n {
			at := l.punch(ctx, t, wait)
			f.Each = append(f.Each, at)
			gr = append(gr, at.Greet)
			if at.FirstGreetFailed {
				f.FirstGreetFailed++
			}
			if at.Direct {
				f.Direct++
				to = append(to, at.ToDirect)
			}
		}
		f.ToDirect, f.Greet = Summarize(to), Summarize(gr)
		t.Logf("NAT %s: direct %d/%d; time to direct %v; greeting through the relay %v (first greeting refused %d/%d)",
			f.Pair, f.Direct, n, f.ToDirect, f.Greet, f.FirstGreetFailed, n)
		all = append(all, f)
	}
	WriteFigures(t, all)
	t.Run("FirstGreetingOverFreshCircuit", func(t *testing.T) {
		failed := 0
		for _, f := range all {
			failed += f.FirstGreetFailed
		}
		// A relayed connection is Limited, and the circuit addresses are
		// announced as soon as a reservation holds them: the first
		// greeting through a fresh circuit is taken (it was refused as
		// "unknown peer" before node/mail/relay.go and node/api told both).
		if failed > 0 {
			t.Errorf("%d first greetings refused right after connecting through a relay", failed)
		}
	})
	t.Run("DirectConversationWithoutRelay", func(t *testing.T) {
		l.directWithoutRelay(ctx, t)
	})
	for _, f := range all {
		switch f.Pair {
		case "eim/eim":
			if f.Direct != f.Attempts {
				t.Errorf("NAT eim/eim: hole punching made a direct connection %d times in %d, want every time", f.Direct, f.Attempts)
			}
		default:
			if f.Direct != 0 {
				t.Errorf("NAT %s: %d direct connections through a symmetric NAT: the lab's NAT is not symmetric", f.Pair, f.Direct)
			}
		}
	}
}

// directWithoutRelay: behind two endpoint-independent NATs, once hole
// punching has made a direct connection, the relay is killed and the
// conversation goes on: the connection that carries it is direct, not
// the relay's limited one.
func (l *natLab) directWithoutRelay(ctx context.Context, t *testing.T) {
	l.setNAT("eim", "eim")
	a, b := l.peers(t, l.r1Addr)
	b.Start(ctx)
	waitSlots(ctx, t, b, l.r1)
	a.Start(ctx)
	waitSlots(ctx, t, a, l.r1)
	defer func() { a.Stop(); b.Stop() }()
	holePunchReady(ctx, t, a, b)
	greetThroughRelay(ctx, t, a, b, l.r1, pubR1)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := Poll(wctx, 50*time.Millisecond, func() error {
		if ia, ib := l.directPackets(); ia < directThreshold || ib < directThreshold {
			return fmt.Errorf("no direct connection yet: %d, %d packets", ia, ib)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	l.r1.Kill()
	defer l.r1.Start(ctx)
	_, ib0 := l.directPackets()
	res, err := a.API().Send(ctx, api.SendRequest{Peer: b.PeerID(), Text: "lab-direct after the relay died"})
	if err != nil {
		t.Fatalf("send with the relay gone: %v", err)
	}
	if res.Delivered != "conversation" {
		t.Errorf("with a direct connection and the relay gone, the message was %s, want said in the conversation", res.Delivered)
	}
	took := waitAudit(ctx, t, b, a.PeerID(), "lab-direct", 10*time.Second)
	// b audited it, so its packets reached b; through gwB from gwA's
	// address they came directly (the relay is dead).
	if _, ib := l.directPackets(); ib == ib0 {
		t.Errorf("no packet reached b directly while the message went from a to b")
	}
	t.Logf("relay killed, the message went directly (audited by b %.1f ms after the send returned)", ms(took))
}

// TestNATFallbacks: behind two symmetric NATs hole punching cannot
// succeed, so everything goes through relays. The conversation runs over
// the relay; mail left while the peer is away waits in its relay's mailbox
// and is delivered when it comes back; when the relay carrying the
// conversation is killed, the next message goes through the second relay
// (or its mailbox). No message is lost.
func TestNATFallbacks(t *testing.T) {
	l := newNATLab(t)
	l.setNAT("sym", "sym")
	ctx := context.Background()
	a, b := l.peers(t, l.r1Addr, l.r2Addr)
	b.Start(ctx)
	waitSlots(ctx, t, b, l.r1, l.r2)
	a.Start(ctx)
	// No wait for hole punching to start: between two symmetric NATs it
	// cannot succeed, and a greeting is made as soon as both hold slots.
	waitSlots(ctx, t, a, l.r1, l.r2)
	figures := map[string]any{}
	send := func(text string) string {
		t.Helper()
		res, err := a.API().Send(ctx, api.SendRequest{Peer: b.PeerID(), Text: text})
		if err != nil {
			t.Fatalf("send %q: %v", text, err)
		}
		return res.Delivered
	}

	// The conversation, through r1.
	start := time.Now()
	greetThroughRelay(ctx, t, a, b, l.r1, pubR1)
	figures["greet_through_relay_ms"] = ms(time.Since(start))
	if how := send("lab-m1 over the relay"); how != "conversation" {
		t.Errorf("m1 was %s, want said in the conversation", how)
	}
	figures["m1_delivery_ms"] = ms(waitAudit(ctx, t, b, a.PeerID(), "lab-m1", 10*time.Second))
	if ia, ib := l.directPackets(); ia+ib != 0 {
		t.Errorf("%d packets passed directly between two symmetric NATs", ia+ib)
	}

	// b is away: the message waits in a mailbox.
	b.Stop()
	if how := send("lab-m2 while b is away"); how != "queued" {
		t.Fatalf("m2 was %s while b was stopped, want queued for its mailbox", how)
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := Poll(octx, 50*time.Millisecond, func() error {
		ob, err := a.API().Outbox(octx)
		if err != nil {
			return err
		}
		if len(ob.Messages) > 0 {
			return fmt.Errorf("%d messages still in a's outbox: %+v", len(ob.Messages), ob.Messages)
		}
		return nil
	}); err != nil {
		t.Fatalf("m2 never left a's outbox for a mailbox: %v", err)
	}
	restart := time.Now()
	b.Start(ctx)
	figures["m2_mailbox_delivery_after_restart_ms"] = ms(time.Since(restart) + waitAudit(ctx, t, b, a.PeerID(), "lab-m2", 30*time.Second))
	waitSlots(ctx, t, b, l.r1, l.r2)

	// A conversation through r1 again, then r1 dies.
	greetThroughRelay(ctx, t, a, b, l.r1, pubR1)
	if how := send("lab-m3 before the relay dies"); how != "conversation" {
		t.Errorf("m3 was %s, want said in the conversation", how)
	}
	waitAudit(ctx, t, b, a.PeerID(), "lab-m3", 10*time.Second)
	l.r1.Kill()
	killed := time.Now()
	how := send("lab-m4 after the relay died")
	figures["m4_after_relay_killed"] = how
	// m4 goes through r2: said in a conversation through its circuit, or
	// left at b's mailbox there, which tells b at once that mail waits (b
	// holds a slot on r2). Either way b has it within 10 s of r1's death
	// (issue 27's bar); it used to wait for b's next mailbox.poll, 59.7 s.
	m4Within := time.Until(killed.Add(m4Bar))
	figures["m4_delivery_after_kill_ms"] = ms(time.Since(killed) + waitAudit(ctx, t, b, a.PeerID(), "lab-m4", m4Within))
	for _, m := range []string{"lab-m1", "lab-m2", "lab-m3", "lab-m4"} {
		if ok, err := auditHas(ctx, b, a.PeerID(), m); err != nil || !ok {
			t.Errorf("%s lost (audited: %v, %v)", m, ok, err)
		}
	}
	t.Logf("fallbacks behind two symmetric NATs: %v", figures)
	WriteFigures(t, figures)
}

// m4Bar is how soon after its relay's death the next message must reach
// the peer, by whichever relay or mailbox.
const m4Bar = 10 * time.Second

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
