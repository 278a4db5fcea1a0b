package netlab

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/discovery"
)

// TestDHTNodeControlChannel runs dhtnode (capdht.DHT as its own
// process) three times on loopback and drives it as the DHT lab does:
// provide, status and find, and every refusal of its flags and its
// control channel. It is not opt-in: no root, no namespaces.
func TestDHTNodeControlChannel(t *testing.T) {
	dir := t.TempDir()
	bin := buildDHTNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(name string, args ...string) *dhtProc {
		t.Helper()
		p, err := startDHTProc(ctx, bin, dir, name, "", nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		return p
	}
	call := func(p *dhtProc, req map[string]any) dhtAnswer {
		t.Helper()
		a, err := p.Call(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	a := start("a", "-provide", "lab.a")
	if st := call(a, map[string]any{"op": "status"}); st.Error != "" || st.RoutingTable == nil || *st.RoutingTable != 0 {
		t.Fatalf("a alone: status %+v, want an empty routing table", st)
	}
	// Alone, a find says why it cannot look anything up.
	if f := call(a, map[string]any{"op": "find", "name": "lab.b"}); !strings.Contains(f.Error, discovery.ErrNoDHTPeers.Error()) {
		t.Fatalf("find with nobody to ask: %+v, want %q", f, discovery.ErrNoDHTPeers)
	}

	b := start("b", "-bootstrap", a.Addrs[0], "-provide", "lab.b")
	c := start("c", "-bootstrap", a.Addrs[0])
	provided := func(p *dhtProc, name string) {
		t.Helper()
		if err := Poll(ctx, 20*time.Millisecond, func() error {
			st := call(p, map[string]any{"op": "status"})
			for _, n := range st.Provided {
				if n == name {
					return nil
				}
			}
			return errors.New(p.Name + ": no record of " + name + " sent yet")
		}); err != nil {
			t.Fatal(err)
		}
	}
	provided(b, "lab.b")
	provided(a, "lab.a") // sent once b or c joined
	found := func(from *dhtProc, name string, want *dhtProc) dhtAnswer {
		t.Helper()
		var f dhtAnswer
		if err := Poll(ctx, 50*time.Millisecond, func() error {
			f = call(from, map[string]any{"op": "find", "name": name, "want": want.PeerID})
			if !f.Found {
				return errors.New(from.Name + " has not found " + name + " yet: " + f.Error)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// In three nodes everyone is in everyone's routing table: the record
	// is held by the finder itself (0) or one hop away.
	for _, f := range []dhtAnswer{found(c, "lab.b", b), found(b, "lab.a", a), found(a, "lab.b", b)} {
		if f.Hops == nil || *f.Hops < 0 || *f.Hops > 1 {
			t.Errorf("find: hops %v, want 0 or 1 in three nodes: %+v", f.Hops, f)
		}
		if f.LookupMS <= 0 || len(f.Providers) != 1 {
			t.Errorf("find: %+v, want one provider and a lookup time", f)
		}
	}
	// provide replaces the names; the new one is found.
	if p := call(a, map[string]any{"op": "provide", "names": []string{"lab.a2"}}); p.Error != "" {
		t.Fatalf("provide: %v", p.Error)
	}
	provided(a, "lab.a2")
	found(c, "lab.a2", a)

	// Refusals on the control channel, each naming what was wrong.
	for _, tc := range []struct {
		req  map[string]any
		want string
	}{
		{map[string]any{"op": "dance"}, `op "dance": want provide, status or find`},
		{map[string]any{"op": "provide", "names": []string{"Bad Name"}}, negotiate.ErrInvalidName.Error()},
		{map[string]any{"op": "find", "name": "Bad Name"}, negotiate.ErrInvalidName.Error()},
		{map[string]any{"op": "find", "name": "lab.b", "limit": discovery.MaxFindLimit + 1}, "limit 101: want 1 to 100"},
		{map[string]any{"op": "find", "name": "lab.b", "want": "nobody"}, `want "nobody": not a peer ID`},
	} {
		if got := call(c, tc.req); !strings.Contains(got.Error, tc.want) {
			t.Errorf("%v: error %q, want it to say %q", tc.req, got.Error, tc.want)
		}
	}
	// A line that is not JSON is answered (id 0) and the node goes on.
	c.mu.Lock()
	ch := make(chan dhtAnswer, 1)
	c.waiting[0] = ch
	_, err := c.stdin.Write([]byte("status please\n"))
	c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ch:
		if !strings.Contains(got.Error, "want one JSON object a line") {
			t.Errorf("a line that is not JSON: %+v", got)
		}
	case <-ctx.Done():
		t.Fatal("no answer to a line that is not JSON")
	}
	if st := call(c, map[string]any{"op": "status"}); st.Error != "" {
		t.Errorf("status after a bad line: %v", st.Error)
	}

	// The end of stdin ends the node.
	c.stdin.Close()
	select {
	case <-c.exited:
	case <-ctx.Done():
		t.Fatal("c still running after its stdin closed")
	}
}

// TestDHTNodeRefusesBadConfig: dhtnode exits 1 with a message naming the
// flag (or environment variable) and what would work.
func TestDHTNodeRefusesBadConfig(t *testing.T) {
	bin := buildDHTNode(t)
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"-dht", "off"}, "", discovery.ErrDHTOff.Error()},
		{[]string{"-dht", "sometimes"}, "", `discovery.dht: "sometimes": want "auto", "server" or "client"`},
		{nil, "IFACED_DHTNODE_DHT=sometimes", `discovery.dht: "sometimes"`},
		{nil, "IFACED_DHTNODE_CONNS_LOW=many", `IFACED_DHTNODE_CONNS_LOW="many"`},
		{[]string{"-reprovide", "0s"}, "", "discovery.reprovide: 0s: want a positive duration"},
		{[]string{"-provide", "lab.ok,Not OK"}, "", `providing "Not OK": ` + negotiate.ErrInvalidName.Error()},
		{[]string{"-conns-low", "0"}, "", "-conns-low 0, -conns-high 600: want 0 < low <= high"},
		{[]string{"-max-memory-mb", "1"}, "", "-max-memory-mb 1: want at least 16"},
		{[]string{"-log", "loud"}, "", `-log "loud": want debug, info, warn or error`},
		{[]string{"-listen", "/ip4/127.0.0.1/udp/1"}, "", "starting libp2p host on /ip4/127.0.0.1/udp/1"},
		{[]string{"-bootstrap", "/ip4/127.0.0.1/tcp/1"}, "", "discovery.bootstrap"},
		{[]string{"extra"}, "", `unexpected argument "extra"`},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = os.Environ()
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("dhtnode %v %s: %v, %q; want exit 1 saying %q", tc.args, tc.env, err, out, tc.want)
		}
	}
}
