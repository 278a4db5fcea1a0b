package hostile

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multiaddr"
)

// Peer is one libp2p host on loopback with its own key, speaking the
// daemon's protocols byte by byte: the suite's attackers and its
// established peer. It is not an ifaced daemon, so it can send what no
// daemon would.
type Peer struct {
	host.Host
	ID *identity.Identity
}

// NewPeer starts a host with a fresh key, connected to target.
func NewPeer(t testing.TB, target *Target) *Peer {
	t.Helper()
	id, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(id.LibP2PKey()), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.DisableRelay(), libp2p.NoTransports, libp2p.Transport(tcpTransport))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: target.PeerID, Addrs: []multiaddr.Multiaddr{target.P2P}}); err != nil {
		t.Fatalf("connecting to the target: %v", err)
	}
	return &Peer{Host: h, ID: id}
}

// Message is a message of phase from p to target in a new conversation
// (sequence 1), unsigned, with body text.
func (p *Peer) Message(target *Target, phase gossip.Phase, text string) *gossip.Message {
	now := time.Now()
	return &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: p.ID.DID()}, To: []gossip.Agent{{Agent: target.ID.DID()}},
		ConversationID: gossip.NewID("conv", now), Sequence: 1, Phase: phase,
		ContentType: gossip.DefaultContentType,
	}, Body: gossip.Body{Text: text}}
}

// Greeting is a greeting from p to target carrying view (nil: none),
// signed by signer (nil: unsigned).
func (p *Peer) Greeting(t testing.TB, target *Target, view *negotiate.SignedView, signer *identity.Identity) *gossip.Message {
	t.Helper()
	m := p.Message(target, gossip.PhaseGreeting, "hello")
	negotiate.Greeting{}.Write(m, view)
	if signer != nil {
		if err := m.Sign(signer, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// View is p's own capability view with n capabilities whose descriptions
// make it about size bytes, signed by p.
func (p *Peer) View(t testing.TB, n, size int) *negotiate.SignedView {
	t.Helper()
	d := &negotiate.Document{IFP: 7, AgentID: p.ID.DID(), Seq: 1}
	desc := strings.Repeat("x", max(1, size/max(1, n)-64))
	for i := range n {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: fmt.Sprintf("cap.n%d", i), Description: desc})
	}
	v, err := negotiate.SignView(d, p.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Frame encodes m as one frame.
func Frame(t testing.TB, m *gossip.Message) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gossip.WriteMessage(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Exchange opens a stream of proto to target, writes payload and reads
// one answer.
func (p *Peer) Exchange(ctx context.Context, target *Target, proto protocol.ID, payload []byte) (*gossip.Message, error) {
	s, err := p.NewStream(ctx, target.PeerID, proto)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", proto, err)
	}
	defer s.Reset()
	if d, ok := ctx.Deadline(); ok {
		s.SetDeadline(d)
	}
	// Written while the answer is read: a daemon may answer (a refusal)
	// without reading the rest of a frame, and then a writer waiting for
	// flow-control credit would wait for nothing.
	wrote := make(chan error, 1)
	go func() {
		_, err := s.Write(payload)
		wrote <- err
	}()
	m, err := gossip.ReadMessage(bufio.NewReader(s))
	if err != nil {
		select {
		case werr := <-wrote:
			if werr != nil {
				return nil, fmt.Errorf("writing: %w (reading the answer: %v)", werr, err)
			}
		default:
		}
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return m, nil
}

// Established is peers the daemon's owner knows (each key pinned with
// `ifaced trust --verify`), greeting it in turn while an attack runs: the suite's measure of "established peers keep working".
// Each greeting is a capabilities query (a greeting on wire.Capabilities)
// answered with the daemon's view. Each peer greets within its own rate
// allowance (a cool conversation's 10 a minute), so a refusal is the
// attack's doing, never the suite's.
type Established struct {
	peers []*Peer
	views []*negotiate.SignedView

	mu        sync.Mutex
	latencies []time.Duration
	failures  []string
	stop      chan struct{}
	done      chan struct{}
}

const (
	establishedPeers = 6
	establishedEvery = 7 * time.Second // per peer: under 10 a minute
)

// Establish starts establishedPeers peers greeting target in turn, one
// greeting every establishedEvery/establishedPeers, after one greeting
// each that must succeed.
func Establish(t testing.TB, target *Target) *Established {
	t.Helper()
	e := &Established{stop: make(chan struct{}), done: make(chan struct{})}
	for range establishedPeers {
		p := NewPeer(t, target)
		target.Pin(t, p.ID)
		e.peers = append(e.peers, p)
		e.views = append(e.views, p.View(t, 1, 200))
		if err := e.greet(t, target, len(e.peers)-1); err != nil {
			t.Fatalf("an established peer's first greeting: %v", err)
		}
	}
	e.latencies = nil
	go func() {
		defer close(e.done)
		tick := time.NewTicker(establishedEvery / establishedPeers)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-e.stop:
				return
			case <-tick.C:
			}
			if err := e.greet(t, target, i%len(e.peers)); err != nil {
				e.mu.Lock()
				e.failures = append(e.failures, err.Error())
				e.mu.Unlock()
			}
		}
	}()
	t.Cleanup(e.Stop)
	return e
}

func (e *Established) greet(t testing.TB, target *Target, i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := e.peers[i]
	g := p.Greeting(t, target, e.views[i], p.ID)
	start := time.Now()
	m, err := p.Exchange(ctx, target, wire.Capabilities, Frame(t, g))
	took := time.Since(start)
	if err != nil {
		return err
	}
	if m.Headers.Phase != gossip.PhaseGreeting {
		return fmt.Errorf("answered with %s: %s", m.Headers.Phase, m.Body.Text)
	}
	e.mu.Lock()
	e.latencies = append(e.latencies, took)
	e.mu.Unlock()
	return nil
}

// Stop ends the greetings (idempotent).
func (e *Established) Stop() {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	<-e.done
}

// Report stops the greetings, has one peer greet once more (so that even
// an attack shorter than the greeting period is followed by a greeting
// that must work), and returns how many succeeded, their 95th percentile
// and the failures.
func (e *Established) Report(t testing.TB, target *Target) (n int, p95 time.Duration, failures []string) {
	e.Stop()
	if err := e.greet(t, target, 0); err != nil {
		e.failures = append(e.failures, "after the attack: "+err.Error())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	l := slices.Clone(e.latencies)
	slices.Sort(l)
	if len(l) > 0 {
		p95 = l[min(len(l)-1, len(l)*95/100)]
	}
	return len(l), p95, e.failures
}
