package hostile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/interop/netlab"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
)

// Converse opens a conversation with target: it writes the greeting,
// reads the answer, writes the next message (numbered after the answer,
// with parts), ends its side and waits for the daemon to end its own, by
// which time the daemon has taken the message.
func (p *Peer) Converse(ctx context.Context, t testing.TB, target *Target, view *negotiate.SignedView, parts ...gossip.Part) error {
	t.Helper()
	s, err := p.NewStream(ctx, target.PeerID, wire.Conversation)
	if err != nil {
		return fmt.Errorf("opening a conversation: %w", err)
	}
	defer s.Reset()
	if d, ok := ctx.Deadline(); ok {
		s.SetDeadline(d)
	}
	now := time.Now()
	c := gossip.NewConversation(gossip.NewID("conv", now), gossip.Agent{Agent: p.ID.DID()}, gossip.Agent{Agent: target.ID.DID()})
	g, err := c.Next(gossip.PhaseGreeting, now)
	if err != nil {
		return err
	}
	negotiate.Greeting{}.Write(g, view)
	g.Body.Text = "hello"
	if err := g.Sign(p.ID, now); err != nil {
		return err
	}
	if err := gossip.WriteMessage(s, g); err != nil {
		return fmt.Errorf("writing the greeting: %w", err)
	}
	c.Sent(g)
	r := bufio.NewReader(s)
	answer, err := gossip.ReadMessage(r)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if answer.Headers.Phase != gossip.PhaseGreeting {
		return fmt.Errorf("the greeting was answered with %s: %s", answer.Headers.Phase, answer.Body.Text)
	}
	if err := c.Accept(answer); err != nil {
		return fmt.Errorf("the answer: %w", err)
	}
	next, err := c.Next(gossip.PhaseContext, time.Now())
	if err != nil {
		return err
	}
	next.Body = gossip.Body{Text: "a key statement", Parts: parts}
	if err := next.Sign(p.ID, time.Now()); err != nil {
		return err
	}
	if err := gossip.WriteMessage(s, next); err != nil {
		return fmt.Errorf("writing the statement: %w", err)
	}
	s.CloseWrite()
	for {
		m, err := gossip.ReadMessage(r)
		if err != nil {
			return nil // the daemon ended the conversation: it took the message
		}
		if m.Headers.Phase == gossip.PhaseError {
			return fmt.Errorf("the statement was refused: %s", m.Body.Text)
		}
	}
}

// keyPart is a key statement as a message part.
func keyPart(name string, v any) gossip.Part {
	raw, _ := json.Marshal(v)
	var content any
	json.Unmarshal(raw, &content)
	return gossip.Part{ContentType: "application/json", Name: name, Content: content}
}

// Fresh keys each greet the daemon and then revoke themselves: every
// revocation is about a key the daemon met, so it is followed. The key
// records strangers cause are held in memory, at most 4,096
// (docs/bounds.md; `ifaced trust` shows them, asked from outside): none reaches
// the store, no trust record is made, the home grows by the strangers'
// share of the audit log at most, and afterwards a pinned peer's rotation
// is recorded and the owner's own rotation and revocation work. The long
// form (6,000 keys) is past the cap.
func TestSelfRevokingKeyFlood(t *testing.T) {
	enabled(t)
	const auditMB = 512 // a quarter, the strangers' share, holds the long form's conversations
	target := Start(t, Options{Extra: fmt.Sprintf("[audit]\nmax_mb = %d\n", auditMB)})
	e := Establish(t, target)
	before := target.Measure(t)
	n := scale(600, 6000)
	var mu sync.Mutex
	attackers := map[string]bool{}
	failed := 0
	var firstErr error
	parallel(n, 4, func(int) {
		p := NewPeer(t, target)
		defer p.Close()
		mu.Lock()
		attackers[p.ID.PeerID().String()] = true
		mu.Unlock()
		rev, err := identity.NewRevocation(p.ID, p.ID.KeyID(), time.Now(), "")
		if err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Converse(ctx, t, target, p.View(t, 1, 200), keyPart("key_revocation", rev)); err != nil {
			mu.Lock()
			failed++
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	})
	if failed > 0 {
		t.Errorf("%d of %d self-revocations were not taken; first: %v", failed, n, firstErr)
	}
	// A pinned peer rotates its key after the flood: followed, and
	// recorded in the store.
	pinned := e.peers[1]
	next, _ := identity.Generate(nil)
	succ, err := identity.NewSuccession(pinned.ID, next, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pinned.Converse(ctx, t, target, e.views[1], keyPart("key_succession", succ)); err != nil {
		t.Fatalf("a pinned peer's rotation after the flood: %v", err)
	}
	// The daemon holds the strangers' revocations, up to the cap.
	out, err := exec.Command(netlab.Binary(t), "trust", "--json", "--home", target.Home).Output()
	if err != nil {
		t.Fatalf("ifaced trust --json: %v", err)
	}
	var list []struct {
		Peer      string `json:"peer"`
		RevokedBy string `json:"revoked_by"`
		Class     string `json:"class"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, p := range list {
		if attackers[p.Peer] && p.RevokedBy == "self" && p.Class == "stranger" {
			held++
		}
	}
	if want := min(n, maxStrangerKeyRecords); held != want {
		t.Errorf("the daemon holds %d of the attackers' revocations, want %d (all of them, up to the cap)", held, want)
	}
	after := holds(t, target, e, before)
	peers, trusts := target.Records(t) // stops the daemon
	keys := target.KeyRecords(t)
	count := func(ids []string) int {
		c := 0
		for _, id := range ids {
			if attackers[id] {
				c++
			}
		}
		return c
	}
	var keyPeers []string
	rotated := false
	for _, k := range keys {
		keyPeers = append(keyPeers, k.Peer)
		rotated = rotated || (k.Kind == store.KeySuccession && k.Peer == pinned.ID.PeerID().String() && k.Successor == next.PeerID().String())
	}
	grew := after.Disk - before.Disk
	t.Logf("%d self-revoking keys: %d revocations held, disk +%s; the store holds %d peer, %d trust and %d key records (%d, %d and %d of them the attackers')",
		n, held, MiB(grew), len(peers), len(trusts), len(keys), count(peers), count(trusts), count(keyPeers))
	if c := count(keyPeers) + count(trusts) + count(peers); c > 0 {
		t.Errorf("the attackers left %d records in the store (key, trust and peer records), want none", c)
	}
	if !rotated {
		t.Error("the pinned peer's rotation after the flood is not in the store")
	}
	// Their conversations within the strangers' share of the audit log,
	// and the seen IDs of their messages and the refusal summaries.
	if bound := int64(auditMB<<20)/4 + 8<<20; grew > bound {
		t.Errorf("disk grew %s for %d self-revoking keys, over the bound %s (a quarter of audit.max_mb, and 8 MiB)", MiB(grew), n, MiB(bound))
	}
	// The owner's own rotation and revocation work on the stopped daemon.
	bin := netlab.Binary(t)
	for _, args := range [][]string{{"key", "rotate"}, {"key", "revoke", "--reason", "after the flood"}} {
		if out, err := exec.Command(bin, append(args, "--home", target.Home)...).CombinedOutput(); err != nil {
			t.Errorf("ifaced %v after the flood: %v: %s", args, err, out)
		}
	}
}

// maxStrangerKeyRecords is the bound docs/bounds.md states on the key
// records held for strangers (trust.MaxStrangerKeyRecords).
const maxStrangerKeyRecords = 4096

// KeyRecords returns the key lifecycle records in the stopped daemon's
// store.
func (d *Target) KeyRecords(t testing.TB) []store.KeyEvent {
	t.Helper()
	d.stop()
	st, err := store.Open(filepath.Join(d.Home, "ifaced.db"))
	if err != nil {
		t.Fatalf("opening the stopped daemon's store: %v", err)
	}
	defer st.Close()
	evs, err := st.KeyEvents()
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
