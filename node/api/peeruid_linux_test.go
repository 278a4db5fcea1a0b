//go:build linux

package api

import (
	"encoding/binary"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/interop/otheruser"
)

// TestSocketOwner: the owner of a loopback connection's client end is
// found in the kernel's tables, for this process's user and for another
// user's process, over IPv4 and IPv6.
func TestSocketOwner(t *testing.T) {
	for _, network := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", network)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 2)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()
		// Both ways of finding the owner, sock_diag and the tables, agree.
		owner := func(c net.Conn) (uint32, error) {
			l, r := c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()
			diag, derr := diagOwner(unmapPort(l), unmapPort(r))
			proc, perr := procOwner(unmapPort(l), unmapPort(r))
			if derr != nil || perr != nil || diag != proc {
				t.Errorf("%s: sock_diag says %d (%v), the tables %d (%v)", network, diag, derr, proc, perr)
			}
			return socketOwner(l, r)
		}

		mine, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer mine.Close()
		srv := <-accepted
		defer srv.Close()
		if uid, err := owner(srv); err != nil || uid != uint32(os.Geteuid()) {
			t.Errorf("%s: this process's connection is owned by %d (%v), want %d", network, uid, err, os.Geteuid())
		}

		if os.Geteuid() == 0 {
			local, release := otheruser.Hold(t, ln.Addr().String())
			theirs := <-accepted
			if theirs.RemoteAddr().String() != local {
				t.Fatalf("accepted %s, the other user dialled from %s", theirs.RemoteAddr(), local)
			}
			if uid, err := owner(theirs); err != nil || uid != otheruser.UID {
				t.Errorf("%s: the other user's connection is owned by %d (%v), want %d", network, uid, err, otheruser.UID)
			}
			release()
			theirs.Close()
		}
	}
	// A connection that is not there (its client gone) has no owner: the
	// check fails closed.
	gone, here := netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")
	if _, err := socketOwner(here, gone); err == nil || !strings.Contains(err.Error(), "no socket") {
		t.Errorf("a connection that does not exist: %v", err)
	}
	if _, err := diagOwner(here, gone); err == nil {
		t.Error("sock_diag found a connection that does not exist")
	}
	otheruser.Need(t) // the other user's half above ran only as root
}

// TestOwnerIn: the table is read as the kernel writes it: addresses in
// host byte order, the uid column found on the line whose address
// columns match, never a match elsewhere on a line.
func TestOwnerIn(t *testing.T) {
	l4, r4 := netip.MustParseAddrPort("127.0.0.1:4818"), netip.MustParseAddrPort("127.0.0.1:42000")
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 { // little-endian, as the figures below are
		if got := procAddr4(l4); got != "0100007F:12D2" {
			t.Errorf("procAddr4(%s) = %s", l4, got)
		}
		if got := procAddr6(netip.MustParseAddrPort("[::1]:4818")); got != "00000000000000000000000001000000:12D2" {
			t.Errorf("procAddr6([::1]:4818) = %s", got)
		}
		if got := procAddr6(netip.MustParseAddrPort("[::ffff:127.0.0.1]:80")); got != "0000000000000000FFFF00000100007F:0050" {
			t.Errorf("procAddr6 of a mapped address = %s", got)
		}
	}
	client, server := procAddr4(r4), procAddr4(l4)
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: " + server + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0 100 0 0 10 0\n" +
		"   1: " + server + " " + client + " 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1\n" +
		"   2: " + client + " " + server + " 01 00000000:00000000 00:00000000 00000000  1001        0 3 1 0 20 4 30 10 -1\n"
	if uid, ok := ownerIn([]byte(table), client+" "+server+" "); !ok || uid != 1001 {
		t.Errorf("the client's line: %d %v, want 1001", uid, ok)
	}
	if uid, ok := ownerIn([]byte(table), server+" "+client+" "); !ok || uid != 0 {
		t.Errorf("the server's line: %d %v, want 0", uid, ok)
	}
	// The same text elsewhere than the address columns is not a match.
	odd := "   0: 0100007F:0001 0100007F:0002 01 " + client + " " + server + " 00 00000000     7        0 3\n"
	if uid, ok := ownerIn([]byte(odd), client+" "+server+" "); ok {
		t.Errorf("a match outside the address columns gave uid %d", uid)
	}
}

// TestControlAPIRefusesAnotherUser: a process of another local user
// that holds the token (it leaked) and a console session cookie (sent to
// its server by the owner's browser) gets 403 for each, the hello and the
// console's pages included; the owner's own processes are served.
func TestControlAPIRefusesAnotherUser(t *testing.T) {
	otheruser.Need(t)
	d := startDaemon(t, nil)
	d.srv.MountUI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("console " + r.URL.Path)) }))
	base := "http://" + d.srv.Addr()
	token := strings.TrimSpace(string(mustRead(t, TokenFile(d.home))))
	for _, req := range []otheruser.Request{
		{Method: "GET", URL: base + "/v1/status", Header: map[string]string{"Authorization": "Bearer " + token}},
		{Method: "POST", URL: base + "/v1/caps", Header: map[string]string{"Authorization": "Bearer " + token}, Body: `{"name": "x.y", "description": "z"}`},
		{Method: "GET", URL: base + "/v1/hello?nonce=" + strings.Repeat("ab", 32)},
		{Method: "GET", URL: base + "/ui/", Header: map[string]string{"Cookie": "ifaced_ui_1=anything"}},
		{Method: "GET", URL: base + "/ui/login?code=abc"},
	} {
		got := otheruser.Do(t, req)
		if got.Status != http.StatusForbidden || !strings.Contains(got.Body, "comes from a process of user 65534") || strings.HasPrefix(got.Body, "console ") {
			t.Errorf("%s %s as uid %d: %d %q %s", req.Method, req.URL, otheruser.UID, got.Status, got.Body, got.Err)
		}
	}
	// The owner's processes: the same requests are served.
	for path, want := range map[string]int{"/v1/status": http.StatusOK, "/ui/": http.StatusOK} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s as the owner: %d", path, res.StatusCode)
		}
	}
	if docs, err := d.c.OwnDocument(testContext(t)); err != nil || docs == nil {
		t.Errorf("the owner's client: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkConnOwner measures the owner lookup a new TCP connection to
// the control API costs, both ways, with other TCP connections in the
// network namespace (the daemon's libp2p connections are among them):
// each extra connection adds two sockets, one per end.
func BenchmarkConnOwner(b *testing.B) {
	for _, extra := range []int{0, 500, 2500} {
		b.Run("connections="+strconv.Itoa(extra), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, extra+1)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					accepted <- c
				}
			}()
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range extra + 1 {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				conns = append(conns, c, <-accepted)
			}
			srv := conns[len(conns)-1]
			local, remote := srv.LocalAddr().(*net.TCPAddr).AddrPort(), srv.RemoteAddr().(*net.TCPAddr).AddrPort()
			for _, way := range []struct {
				name string
				f    func(l, r netip.AddrPort) (uint32, error)
			}{{"sock_diag", diagOwner}, {"proc", procOwner}} {
				b.Run(way.name, func(b *testing.B) {
					for range b.N {
						if _, err := way.f(local, remote); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
