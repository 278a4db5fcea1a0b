package node

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/owner"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// conformanceVectors is what these tests read of node/wire's vector files
// (node/wire's package comment describes them).
type conformanceVectors struct {
	Keys map[string]struct {
		Seed string `json:"seed"`
	} `json:"keys"`
	Cases []struct {
		Name   string    `json:"name"`
		Stage  string    `json:"stage"`
		Frames []string  `json:"frames"`
		Peer   string    `json:"peer"`
		Code   wire.Code `json:"code"`
	} `json:"cases"`
}

func readVectors(t *testing.T, name string) conformanceVectors {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("wire", "testdata", "conformance", name))
	if err != nil {
		t.Fatal(err)
	}
	var v conformanceVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func vectorKey(t *testing.T, v conformanceVectors, name string) *identity.Identity {
	t.Helper()
	seed, err := hex.DecodeString(v.Keys[name].Seed)
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestUpdateRefusalVectors: the update pushes of the conformance vectors
// (stage "update"), sent by their peer's key on /ifp/7/update/1.0.0 to a
// daemon with bob's key that holds no conversation with it, are refused
// with the vector's code: a push that is not a context message is
// out_of_sequence, as the wire doc says, and its message does not say it
// should have been one.
func TestUpdateRefusalVectors(t *testing.T) {
	v := readVectors(t, "refusals.json")
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if _, err := h.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	// The daemon's clock reads the vectors' date, so that their messages
	// are within its replay window.
	at := time.Date(2026, 3, 4, 23, 58, 30, 0, time.UTC)
	id := vectorKey(t, v, "bob")
	n, err := New(loopbackConfig(), id, h, testLogger(t), WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	bob := &testDaemon{Node: n, home: h, id: id}
	checked := 0
	for _, c := range v.Cases {
		if c.Stage != "update" {
			continue
		}
		checked++
		peerID := vectorKey(t, v, c.Peer)
		ph, err := libp2p.New(libp2p.Identity(peerID.LibP2PKey()), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = ph.Connect(ctx, peer.AddrInfo{ID: bob.id.PeerID(), Addrs: bob.Host().Addrs()})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		raw := &rawPeer{Host: ph, id: peerID}
		var payload bytes.Buffer
		for _, f := range c.Frames {
			b, err := hex.DecodeString(f)
			if err != nil {
				t.Fatal(err)
			}
			payload.Write(b)
		}
		m, err := raw.exchange(t, bob, string(wire.Update), payload.Bytes())
		ph.Close()
		if err != nil {
			t.Errorf("%s: no answer: %v", c.Name, err)
			continue
		}
		if code := errorCode(t, m); code != c.Code {
			t.Errorf("%s: answered %s (%s), want %s", c.Name, code, m.Body.Text, c.Code)
		}
		if strings.Contains(m.Body.Text, "travels only in") {
			t.Errorf("%s: the refusal contradicts itself: %s", c.Name, m.Body.Text)
		}
	}
	if checked < 2 {
		t.Fatalf("only %d update cases in the vectors", checked)
	}
}

// TestViewVectors: a daemon with alice's key whose owner makes the
// changes of views.json (each at the document's updated time) shows each
// request of the vectors the seq, updated and capabilities they give:
// what a view shows, and its seq and updated, move only with a change
// visible in it, and never go down for a requester.
func TestViewVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("wire", "testdata", "conformance", "views.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Keys      map[string]struct{ Seed string } `json:"keys"`
		Documents []negotiate.Document             `json:"documents"`
		Requests  []struct {
			After     int    `json:"after"`
			Requester string `json:"requester"`
			Facts     struct {
				AuthLevel   int    `json:"auth_level"`
				Disclosure  string `json:"disclosure"`
				Temperature string `json:"temperature"`
				Persona     string `json:"persona"`
			} `json:"facts"`
			Seq     uint64   `json:"seq"`
			Updated string   `json:"updated"`
			Shows   []string `json:"shows"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	key := func(name string) *identity.Identity {
		seed, _ := hex.DecodeString(v.Keys[name].Seed)
		id, err := identity.FromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	var now atomic.Pointer[time.Time]
	setClock := func(updated string) {
		at, err := time.Parse(time.RFC3339, updated)
		if err != nil {
			t.Fatal(err)
		}
		now.Store(&at)
	}
	setClock(v.Documents[0].Updated)
	cfg := loopbackConfig()
	cfg.Capabilities = nil
	for _, c := range v.Documents[0].Capabilities {
		var m map[string]any
		b, _ := json.Marshal(c)
		json.Unmarshal(b, &m)
		cfg.Capabilities = append(cfg.Capabilities, m)
	}
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if _, err := h.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	alice, err := New(cfg, key("alice"), h, testLogger(t), WithClock(func() time.Time { return *now.Load() }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alice.Close() })
	current := 0
	for i, r := range v.Requests {
		for current < r.After {
			current++
			next := v.Documents[current]
			setClock(next.Updated)
			doc, err := alice.UpdateDocument(func(d *negotiate.Document) error {
				d.Capabilities = next.Capabilities
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if doc.Seq != next.Seq {
				t.Fatalf("the owner's document %d is at seq %d, the vector's at %d", current, doc.Seq, next.Seq)
			}
		}
		f := conditions.Facts{AuthLevel: conditions.Level(r.Facts.AuthLevel), Disclosure: r.Facts.Disclosure,
			Temperature: r.Facts.Temperature, Persona: r.Facts.Persona}
		switch {
		case r.Requester != "":
			f.Peer = key(r.Requester).PeerID().String()
		case f.AuthLevel != conditions.NoLevel:
			f.Peer = owner.AnyRequester // a stranger nobody remembers, as presign asks
		}
		got, err := alice.docs.View(f)
		if err != nil {
			t.Fatal(err)
		}
		var shows []string
		for _, c := range got.Doc.Capabilities {
			shows = append(shows, c.Name)
		}
		if got.Doc.Seq != r.Seq || got.Doc.Updated != r.Updated || !slices.Equal(shows, r.Shows) {
			t.Errorf("request %d (%s %+v after document %d): seq %d (%s) showing %v, want %d (%s) showing %v",
				i, r.Requester, r.Facts, r.After, got.Doc.Seq, got.Doc.Updated, shows, r.Seq, r.Updated, r.Shows)
		}
	}
}
