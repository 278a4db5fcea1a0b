package capdht

import (
	"context"
	"testing"

	"github.com/ifaced/ifaced/node/config"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// What the tests outside the package (scale_test.go, the 100-node network
// with daemons in it) use of the DHT's insides: the kad-dht instance as the
// daemon configures it, the provide and lookup functions, and each node's
// provider store.

// KadOf is d's kad-dht instance.
func KadOf(d *DHT) *dht.IpfsDHT { return d.dht }

// NewBareKad is kad-dht on h as a daemon runs it, with a routing table of
// bucket peers per bucket, and no provide loop: the bare nodes of a test
// network.
func NewBareKad(h host.Host, mode dht.ModeOpt, bucket int) (*dht.IpfsDHT, error) {
	return newCapabilityDHT(h, mode, nil, newProviderRecords(config.DefaultMaxProviderRecords, config.DefaultMaxProvidersPerKey), dht.BucketSize(bucket))
}

var (
	ProvideCapabilities     = provideCapabilities     // the provide round's puts
	FindCapabilityProviders = findCapabilityProviders // the lookup of FindProviders
	BareHost                = bareHost                // a TCP host with only what the DHT needs
	PeerSet                 = peerSet
)

// Holders are the DHT peers whose provider store has a record for name.
func Holders(t testing.TB, dhts []*dht.IpfsDHT, name string) map[peer.ID]bool {
	t.Helper()
	out := map[peer.ID]bool{}
	for _, d := range dhts {
		provs, err := d.ProviderStore().GetProviders(context.Background(), capabilityKey(name).Hash())
		if err != nil {
			t.Fatal(err)
		}
		if len(provs) > 0 {
			out[d.Host().ID()] = true
		}
	}
	return out
}
