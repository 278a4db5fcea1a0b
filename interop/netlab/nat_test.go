package netlab

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/api"
)

// The NAT lab:
//
//	            public segment 192.0.0.128/25 (bridge br0 in namespace sw)
//	  r1 .131 ──┬── r2 .132 ──┬── gwA wan .141 ─────────┬── gwB wan .142
//	                             + .160 … .183 (homes)  + .200 … .223
//	                               │ nft NAT             │ nft NAT
//	                   a0 10.1.0.2/24 … a23 10.1.23.2/24  b0 10.2.0.2/24 …
//
// r1 and r2 are relay daemons (relay service and mailboxes, listening on
// TCP and QUIC); a and b are daemons behind the NAT routers gwA and gwB,
// which reserve slots on the relays. Each attempt's a and b live in
// households of their own (a namespace each, on a LAN of its own behind
// its router, leaving it from a public address of its own), as the two
// ends of a real punch live in two homes: the relays limit new
// connections per address, and a hundred daemons behind one address
// would be refused there (Household). The 24 households of each router
// are taken in turn by the attempts' ports, so each address has time to
// refill between its uses. The routers are Lab.Router's: a NAT
// of a type (endpoint-independent, address-dependent or symmetric
// mapping), a filter that lets in from the public side only packets of
// connections the LAN side opened (ct state established,related), so a
// direct connection between a and b exists only if hole punching opened
// it, and a behaviour for every other packet from the public side: drop
// it, or answer it as a real router does (TCP reset, ICMP port
// unreachable).

const (
	pubR1  = "192.0.0.131"
	pubR2  = "192.0.0.132"
	pubGwA = "192.0.0.141"
	pubGwB = "192.0.0.142"
)

type natLab struct {
	*Lab
	dir          string
	sw, gwA, gwB string
	// The households made so far, by index (household).
	homesA, homesB []string
	r1, r2         *Daemon
	nsR1, nsR2     string
	// The relays' TCP addresses (peers has a and b use them).
	r1Addr, r2Addr string
	cell           natCell
	ports          []int // the listen ports of the a and b in use (the routers count per port); the i-th is household i mod households's
	port           int   // the next listen port for a and b (fresh conntrack tuples per attempt)
}

// households is how many households each router has, taken in turn.
const households = 24

// homeAddrs are household i's LAN subnet, the daemon's address on it, the
// router's, and its public address, behind router A (side 1) or B (2).
func homeAddrs(side, i int) (lan, host, gw, public string) {
	first := 160
	if side == 2 {
		first = 200
	}
	return fmt.Sprintf("10.%d.%d.0/24", side, i), fmt.Sprintf("10.%d.%d.2/24", side, i),
		fmt.Sprintf("10.%d.%d.1/24", side, i), fmt.Sprintf("192.0.0.%d", first+i)
}

// natCell is what the routers are: each side's NAT type and both
// routers' behaviour.
type natCell struct {
	A, B      NATType
	Behaviour RouterBehaviour
}

func newNATLab(t *testing.T) *natLab {
	l := &natLab{Lab: NewLab(t), dir: t.TempDir(), port: 5001}
	ns := l.NS("sw", "r1", "r2", "gwA", "gwB")
	l.sw, l.nsR1, l.nsR2, l.gwA, l.gwB = ns[0], ns[1], ns[2], ns[3], ns[4]
	l.Bridge(l.sw, "br0")
	l.Plug(l.sw, "br0", "p-r1", l.nsR1, "eth0", []string{pubR1 + "/25"}, "")
	l.Plug(l.sw, "br0", "p-r2", l.nsR2, "eth0", []string{pubR2 + "/25"}, "")
	l.Plug(l.sw, "br0", "p-gwA", l.gwA, "wan", []string{pubGwA + "/25"}, "")
	l.Plug(l.sw, "br0", "p-gwB", l.gwB, "wan", []string{pubGwB + "/25"}, "")
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
	l.r1Addr, l.r2Addr = relayAddr(l.r1, pubR1, "tcp"), relayAddr(l.r2, pubR2, "tcp")
	return l
}

// relayAddr is r's address on a transport ("tcp" or "quic").
func relayAddr(r *Daemon, ip, transport string) string {
	if transport == "quic" {
		return "/ip4/" + ip + "/udp/4817/quic-v1/p2p/" + r.PeerID()
	}
	return "/ip4/" + ip + "/tcp/4817/p2p/" + r.PeerID()
}

// setNAT makes the routers drop-routers of the given NAT types (the
// behaviour of the lab before routers that answer).
func (l *natLab) setNAT(typeA, typeB string) {
	l.setCell(natCell{A: NATType(typeA), B: NATType(typeB), Behaviour: RouterDrop})
}

// setCell sets the routers' NAT types and behaviour.
func (l *natLab) setCell(c natCell) {
	l.cell = c
	l.loadRouters()
}

// loadRouters loads both routers' rulesets for the current cell and the
// listen ports in use.
func (l *natLab) loadRouters() {
	dests := []string{pubR1, pubR2}
	homes := func(side int) (hs []Household, publics []string) {
		other := 3 - side
		for i := range l.homesA {
			lan, _, _, public := homeAddrs(side, i)
			_, _, _, peer := homeAddrs(other, i)
			h := Household{LAN: lan, Public: public, Peer: peer}
			for j := i; j < len(l.ports); j += households {
				h.Ports = append(h.Ports, l.ports[j])
			}
			hs = append(hs, h)
			publics = append(publics, public)
		}
		return hs, publics
	}
	homesA, publicA := homes(1)
	homesB, publicB := homes(2)
	l.Router(NATRouter{NS: l.gwA, NAT: l.cell.A, Behaviour: l.cell.Behaviour, Peer: publicB, Destinations: dests, Households: homesA})
	l.Router(NATRouter{NS: l.gwB, NAT: l.cell.B, Behaviour: l.cell.Behaviour, Peer: publicA, Destinations: dests, Households: homesB})
}

// household returns the namespaces of household i behind each router,
// making them (and those before them) on first use.
func (l *natLab) household(i int) (a, b string) {
	for len(l.homesA) <= i {
		n := len(l.homesA)
		ns := l.NS(fmt.Sprintf("a%d", n), fmt.Sprintf("b%d", n))
		for side, gw := range []string{l.gwA, l.gwB} {
			_, host, gwAddr, public := homeAddrs(side+1, n)
			l.IP(gw, fmt.Sprintf("addr add %s/25 dev wan\n", public))
			l.Wire(gw, fmt.Sprintf("lan%d", n), []string{gwAddr}, ns[side], "eth0", []string{host})
			l.IP(ns[side], fmt.Sprintf("route add default via %s\n", strings.TrimSuffix(gwAddr, "/24")))
		}
		l.homesA, l.homesB = append(l.homesA, ns[0]), append(l.homesB, ns[1])
	}
	return l.homesA[i], l.homesB[i]
}

// directPackets are the packets each side's router let in from the other
// side's router.
func (l *natLab) directPackets() (intoA, intoB uint64) {
	intoA, _ = l.Counter(l.gwA, "lab", "direct_in")
	intoB, _ = l.Counter(l.gwB, "lab", "direct_in")
	return intoA, intoB
}

// directOn are the packets of one transport ("tcp" or "udp") each router
// let in from the other router to the LAN's listen port port.
func (l *natLab) directOn(port int, transport string) (intoA, intoB uint64) {
	name := fmt.Sprintf("direct_%d_%s", port, transport)
	intoA, _ = l.Counter(l.gwA, "lab", name)
	intoB, _ = l.Counter(l.gwB, "lab", name)
	return intoA, intoB
}

// peers makes a and b listening on TCP and QUIC on a fresh port,
// reserving on the given relays.
func (l *natLab) peers(t *testing.T, relays ...string) (a, b *Daemon) {
	return l.pair(t, relays, l.reserve(1)[0])
}

// reserve allocates n fresh listen ports for pairs of a and b, and loads
// the routers to count them (attempts on them may then run side by side).
func (l *natLab) reserve(n int) []int {
	ports := make([]int, n)
	for i := range ports {
		ports[i] = l.port
		l.port++
	}
	l.ports = append(l.ports, ports...)
	l.household(min(len(l.ports), households) - 1)
	l.loadRouters()
	return ports
}

// pair makes a and b listening on port (from reserve) on the given
// transports ("tcp", "quic", or both when none is named), reserving on
// the given relays.
func (l *natLab) pair(t *testing.T, relays []string, port int, transports ...string) (a, b *Daemon) {
	if len(transports) == 0 {
		transports = []string{"tcp", "quic"}
	}
	var listen []string
	for _, tr := range transports {
		if tr == "tcp" {
			listen = append(listen, fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", port))
		} else {
			listen = append(listen, fmt.Sprintf("/ip4/0.0.0.0/udp/%d/quic-v1", port))
		}
	}
	name := fmt.Sprintf("%s-%s-%s-%s-%d", l.cell.A, l.cell.B, l.cell.Behaviour, strings.Join(transports, "+"), port)
	// Debug logs: go-libp2p's hole punching service says there, and only
	// there, when a try of three rounds ends in failure.
	extra := "[log]\nlevel = \"debug\"\n"
	// The control API on a port of the pair's own: pairs may run side by
	// side in the same namespaces.
	nsA, nsB := l.household(slices.Index(l.ports, port) % households)
	a = NewDaemon(t, l.dir, "a-"+name, nsA, Config{Listen: listen, RelayUse: relays, Display: "a", Extra: extra, APIPort: port + 10000})
	b = NewDaemon(t, l.dir, "b-"+name, nsB, Config{Listen: listen, RelayUse: relays, Display: "b", Extra: extra, APIPort: port + 10000})
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

// attempt is one hole-punching try between a fresh a and b.
type attempt struct {
	Greet      time.Duration
	Direct     bool
	ToDirect   time.Duration
	Transport  string   // of the direct connections when the first was seen: "quic", "tcp" or "quic+tcp"
	Settled    string   // the same once b logged the punch done
	Rounds     []string // b's log of each round it began, up to the direct connection
	FirstRound bool     // direct in the first DCUtR round the initiator logged
	Delivered  bool     // the message sent after the watch arrived (punchOpts.message)
	Sent       string   // how the send said it went: "conversation" or "queued"
}

func (a attempt) MarshalJSON() ([]byte, error) {
	type out struct {
		Greet      float64 `json:"greet_through_relay_ms"`
		Direct     bool    `json:"direct"`
		ToDirect   float64 `json:"time_to_direct_ms,omitempty"`
		Transport  string  `json:"transport,omitempty"`
		Settled    string  `json:"transport_settled,omitempty"`
		FirstRound bool    `json:"first_round,omitempty"`
		Delivered  bool    `json:"message_delivered,omitempty"`
		Sent       string  `json:"message_sent,omitempty"`
	}
	return json.Marshal(out{ms(a.Greet), a.Direct, ms(a.ToDirect), a.Transport, a.Settled, a.FirstRound, a.Delivered, a.Sent})
}

// directThreshold is how many packets each router must let in from the
// other side before the connection counts as direct: a TCP or QUIC
// handshake, the security handshake and identify are well above it, a
// lone packet of a failed punch is not.
const directThreshold = 10

// punchOpts is how an attempt is made.
type punchOpts struct {
	transports []string // a's and b's listen transports; nil: TCP and QUIC
	relay      string   // the transport of the relay address they reserve on: "tcp", "quic", or "both" (two relay.use entries)
	wait       time.Duration
	message    bool // after the watch, a sends b a message, and the lab waits for b to audit it
	// aAlone: a reserves on no relay, so it has no connection to the relay,
	// and no address of its own observed, until it dials b through it:
	// b's relayed connection comes before a speaks DCUtR.
	aAlone bool
}

// punch runs one attempt: b starts and reserves a slot on r1 (it is
// reachable through nothing else), a starts and at once connects to b's
// circuit through r1 and greets it, with no wait for either to know its
// public address; then the lab watches the routers for a direct
// connection. The watch ends when one forms, when b (which initiates
// DCUtR, the relayed connection having come in on its side) logs that a
// try of three rounds failed, or after o.wait.
func (l *natLab) punch(ctx context.Context, t *testing.T, port int, o punchOpts) attempt {
	relays := []string{relayAddr(l.r1, pubR1, o.relay)}
	if o.relay == "both" {
		relays = []string{relayAddr(l.r1, pubR1, "quic"), relayAddr(l.r1, pubR1, "tcp")}
	}
	a, b := l.pair(t, relays, port, o.transports...)
	if o.aAlone {
		a.Cfg.RelayUse = nil
		a.WriteConfig()
	}
	b.Start(ctx)
	waitSlots(ctx, t, b, l.r1)
	a.Start(ctx)
	defer func() { a.Stop(); b.Stop() }()
	start := time.Now()
	greetThroughRelay(ctx, t, a, b, l.r1, pubR1)
	res := attempt{Greet: time.Since(start)}
	wctx, cancel := context.WithTimeout(ctx, o.wait)
	defer cancel()
	err := Poll(wctx, 50*time.Millisecond, func() error {
		trs, err := directConns(wctx, b, a)
		if err != nil {
			return err
		}
		var confirmed []string
		for _, tr := range trs {
			// The daemon says direct; the routers confirm that packets
			// of that transport passed between them to the listen port.
			counter := map[string]string{"quic": "udp", "tcp": "tcp"}[tr]
			if ia, ib := l.directOn(port, counter); ia > 0 && ib > 0 {
				confirmed = append(confirmed, tr)
			}
		}
		if len(confirmed) > 0 {
			res.Transport = strings.Join(confirmed, "+")
			return nil
		}
		if strings.Contains(b.Log(), "all retries for hole punch") {
			return errGaveUp
		}
		return fmt.Errorf("no direct connection yet")
	})
	if err == nil {
		res.Direct, res.ToDirect = true, time.Since(start)
		// b logs each round's outcome (node/p2phost: Punch); the first
		// round made it if none failed before the direct connection.
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if b.WaitLog(ctx, "hole punching: direct connection") == nil {
			log := b.Log()
			res.FirstRound = !strings.Contains(log[:strings.Index(log, "hole punching: direct connection")], "hole punching: round failed")
		}
		// Once the punch has said it is done: a connection of the other
		// transport may have formed after the first one was seen.
		if trs, err := directConns(ctx, b, a); err == nil {
			res.Settled = strings.Join(trs, "+")
		}
		// What b offered in each round (node/p2phost logs it), up to the
		// direct connection.
		log := b.Log()
		if i := strings.Index(log, "hole punching: direct connection"); i >= 0 {
			for _, line := range strings.Split(log[:i], "\n") {
				if strings.Contains(line, "hole punching: round begins") {
					res.Rounds = append(res.Rounds, line[strings.Index(line, "hole punching"):])
				}
			}
		}
	}
	if err != nil {
		// Why not: what b and a said of the punch (node/p2phost logs each
		// round and try), for the figures' reader.
		for _, d := range []*Daemon{b, a} {
			for _, line := range strings.Split(d.Log(), "\n") {
				if i := strings.Index(line, "hole punching"); i >= 0 && strings.Contains(line, "component=punch") {
					t.Logf("%s: no direct connection (%v); %s said: %s", d.Name, err, d.Name, line[i:])
				}
			}
		}
	}
	if o.message {
		token := fmt.Sprintf("lab-matrix-%d", port)
		sent, err := a.API().Send(ctx, api.SendRequest{Peer: b.PeerID(), Text: token})
		if err != nil {
			t.Logf("%s: send: %v", a.Name, err)
			return res
		}
		res.Sent = sent.Delivered
		// Said in the conversation, it arrives at once; queued, it goes
		// to b's mailbox at r1, which tells b, connected to it, that mail
		// waits (/ifp/8/mail-waiting), and b fetches it at once: within
		// the same bound either way, not at b's next mailbox.poll.
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res.Delivered = Poll(actx, 50*time.Millisecond, func() error {
			if ok, err := auditHas(actx, b, a.PeerID(), token); err != nil || !ok {
				return fmt.Errorf("not audited yet: %v", err)
			}
			return nil
		}) == nil
	}
	return res
}

var errGaveUp = fmt.Errorf("hole punching: %w", ErrGiveUp)

// directConns are the transports ("quic", "tcp", in that order) of the
// direct connections d holds to peer, as d's status lists them: both
// when a punch made one of each (the first listed is not the one in
// use, so the figures name every one).
func directConns(ctx context.Context, d, peer *Daemon) ([]string, error) {
	st, err := d.API().Status(ctx)
	if err != nil {
		return nil, err
	}
	var quic, tcp bool
	for _, c := range st.Connections {
		if c.Peer != peer.PeerID() || c.Via != "direct" || strings.Contains(c.Addr, "/p2p-circuit") {
			continue
		}
		if strings.Contains(c.Addr, "/quic-v1") {
			quic = true
		} else {
			tcp = true
		}
	}
	var trs []string
	if quic {
		trs = append(trs, "quic")
	}
	if tcp {
		trs = append(trs, "tcp")
	}
	return trs, nil
}

// TestNATTraversal: between two endpoint-independent NATs whose routers
// answer unsolicited packets (as OpenWrt's do), daemons listening on TCP
// and QUIC, given the relay's QUIC and TCP addresses, punch a direct
// connection (QUIC offered first), greeting as soon as they start; the
// conversation then survives the relay's death. The matrix of NAT types,
// router behaviours and transports is TestNATMatrix's.
func TestNATTraversal(t *testing.T) {
	l := newNATLab(t)
	ctx := context.Background()
	l.setCell(natCell{A: NATEndpointIndependent, B: NATEndpointIndependent, Behaviour: RouterReject})
	n := 2
	if Long() {
		n = 10
	}
	type figures struct {
		Cell     string      `json:"cell"`
		Attempts int         `json:"attempts"`
		Direct   int         `json:"direct"`
		QUIC     int         `json:"direct_over_quic"`
		ToDirect Percentiles `json:"time_to_direct"`
		Greet    Percentiles `json:"greet_through_relay"`
		Each     []attempt   `json:"each"`
	}
	f := figures{Cell: "eim/eim reject, TCP+QUIC, relay at its QUIC and TCP addresses", Attempts: n}
	var to, gr []time.Duration
	for _, port := range l.reserve(n) {
		at := l.punch(ctx, t, port, punchOpts{relay: "both", wait: 60 * time.Second})
		f.Each = append(f.Each, at)
		gr = append(gr, at.Greet)
		if at.Direct {
			f.Direct++
			to = append(to, at.ToDirect)
			if strings.Contains(at.Transport, "quic") {
				f.QUIC++
			}
		}
	}
	f.ToDirect, f.Greet = Summarize(to), Summarize(gr)
	t.Logf("%s: direct %d/%d (over QUIC %d); time to direct %v; greeting through the relay %v (each the first through its circuit, taken at once: greetThroughRelay fails the test otherwise)",
		f.Cell, f.Direct, n, f.QUIC, f.ToDirect, f.Greet)
	for i, at := range f.Each {
		t.Logf("attempt %d: direct connections %q when the first was seen, %q once the punch was done; b's rounds: %q", i+1, at.Transport, at.Settled, at.Rounds)
	}
	WriteFigures(t, f)
	t.Run("DirectConversationWithoutRelay", func(t *testing.T) {
		l.directWithoutRelay(ctx, t)
	})
	t.Run("RelayedBeforePublicAddress", func(t *testing.T) {
		// a holds no relay slot: until it dials b through r1, nothing
		// observed its address, and it does not speak DCUtR yet when b's
		// relayed connection arrives, so go-libp2p's one try on that
		// connection is refused ("protocols not supported"). b tries
		// again when a's protocols change (node/p2phost: Punch).
		for _, port := range l.reserve(2) {
			at := l.punch(ctx, t, port, punchOpts{relay: "both", wait: 60 * time.Second, aAlone: true})
			if !at.Direct {
				t.Errorf("a relayed connection made before a knew its public address was never replaced by a direct one (%+v)", at)
			} else {
				t.Logf("upgraded %.0f ms after the greeting began, over %s", ms(at.ToDirect), at.Transport)
			}
		}
	})
	// Direct every time is the bar (issue 27). Over QUIC is what the
	// first round offers, but not always what forms: in CI on 2026-11-29
	// one attempt of two came up over TCP (2 of 2 direct), which cause is
	// open; the transport is reported, and the matrix's QUIC cells hold
	// QUIC alone.
	if f.Direct != n {
		t.Errorf("hole punching between two endpoint-independent NATs behind routers that answer: direct %d times in %d (over QUIC %d); want every time", f.Direct, n, f.QUIC)
	}
	t.Logf("over QUIC %d of %d direct connections", f.QUIC, f.Direct)
}

// directWithoutRelay: behind two endpoint-independent NATs, once hole
// punching has made a direct connection, the relay is killed and the
// conversation goes on: the connection that carries it is direct, not
// the relay's limited one.
func (l *natLab) directWithoutRelay(ctx context.Context, t *testing.T) {
	l.setCell(natCell{A: NATEndpointIndependent, B: NATEndpointIndependent, Behaviour: RouterReject})
	a, b := l.peers(t, l.r1Addr)
	b.Start(ctx)
	waitSlots(ctx, t, b, l.r1)
	a.Start(ctx)
	defer func() { a.Stop(); b.Stop() }()
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
	// m4 is sent at once, before a has seen r1's connections close: it is
	// written into the dead circuit. b's acknowledgement cannot come, so
	// within converse.AckWait a leaves the same message at b's mailbox on
	// r2 (node/wire: Acknowledgements); or a sees the circuit close first
	// and greets b again through r2. Before acknowledgements, a message
	// sent 3.6-5.5 ms after the kill was lost while the send answered
	// "conversation", and this test had to wait for a to see the close.
	how := send("lab-m4 after the relay died")
	figures["m4_after_relay_killed"] = how
	// m4 goes through r2: said in a conversation through its circuit, or
	// left at b's mailbox there, which tells b at once that mail waits (b
	// holds a slot on r2). Either way b has it within 10 s of r1's death
	// (issue 27's bar); it used to wait for b's next mailbox.poll, 59.7 s.
	figures["m4_send_returned_after_kill_ms"] = ms(time.Since(killed))
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
