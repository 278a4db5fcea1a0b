package p2phost

import (
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

// A daemon observed over one transport offers, for hole punching, the
// same public IP with its other transports' listen ports too, where the
// NAT kept the observed transport's port; not where it changed it.
func TestInferAddrs(t *testing.T) {
	m := func(ss ...string) []ma.Multiaddr {
		var out []ma.Multiaddr
		for _, s := range ss {
			out = append(out, ma.StringCast(s))
		}
		return out
	}
	listen := m("/ip4/0.0.0.0/tcp/5003", "/ip4/0.0.0.0/udp/5003/quic-v1", "/ip6/::/tcp/5004")
	for _, tc := range []struct {
		name           string
		observed, want []ma.Multiaddr
	}{
		{"quic observed, port kept", m("/ip4/192.0.0.142/udp/5003/quic-v1"),
			m("/ip4/192.0.0.142/udp/5003/quic-v1", "/ip4/192.0.0.142/tcp/5003")},
		{"tcp observed, port kept", m("/ip4/192.0.0.141/tcp/5003"),
			m("/ip4/192.0.0.141/tcp/5003", "/ip4/192.0.0.141/udp/5003/quic-v1")},
		{"both observed", m("/ip4/192.0.0.141/tcp/5003", "/ip4/192.0.0.141/udp/5003/quic-v1"),
			m("/ip4/192.0.0.141/tcp/5003", "/ip4/192.0.0.141/udp/5003/quic-v1")},
		{"port changed by the NAT", m("/ip4/192.0.0.141/tcp/40001"), m("/ip4/192.0.0.141/tcp/40001")},
		{"circuit", m("/ip4/192.0.0.131/tcp/4817/p2p/12D3KooWPAczceRXww1Zg5bvkqQTpLk6kS8gE5yJpgqvb1LPNLyb/p2p-circuit"),
			m("/ip4/192.0.0.131/tcp/4817/p2p/12D3KooWPAczceRXww1Zg5bvkqQTpLk6kS8gE5yJpgqvb1LPNLyb/p2p-circuit")},
	} {
		got := inferAddrs(tc.observed, listen)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if !got[i].Equal(tc.want[i]) {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}
