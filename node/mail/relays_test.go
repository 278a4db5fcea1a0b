package mail

import (
	"crypto/rand"
	"testing"

	"github.com/ifaced/ifaced/node/config"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Two relay.use entries naming one relay (its QUIC and TCP addresses) are
// one relay with both addresses: one reservation, not two.
func TestConfiguredRelaysMergesOneRelaysAddresses(t *testing.T) {
	ids := make([]peer.ID, 3)
	for i := range ids {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		ids[i], _ = peer.IDFromPrivateKey(k)
	}
	r1, r2, self := ids[0].String(), ids[1].String(), ids[2]
	cfg := config.DefaultConfig()
	cfg.Relay.Use = []string{
		"/ip4/192.0.2.1/udp/4817/quic-v1/p2p/" + r1,
		"/ip4/192.0.2.2/tcp/4817/p2p/" + r2,
		"/ip4/192.0.2.1/tcp/4817/p2p/" + r1,
	}
	got := configuredRelays(cfg, self)
	if len(got) != 2 {
		t.Fatalf("%d relays, want 2: %v", len(got), got)
	}
	if got[0].ID.String() != r1 || len(got[0].Addrs) != 2 || got[0].Addrs[0].String() != "/ip4/192.0.2.1/udp/4817/quic-v1" || got[0].Addrs[1].String() != "/ip4/192.0.2.1/tcp/4817" {
		t.Errorf("first relay %v, want %s at its QUIC then its TCP address", got[0], r1)
	}
	if got[1].ID.String() != r2 || len(got[1].Addrs) != 1 {
		t.Errorf("second relay %v, want %s at one address", got[1], r2)
	}
}
