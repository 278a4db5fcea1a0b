package node

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
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
	h := Home{Dir: filepath.Join(t.TempDir(), "home")}
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
