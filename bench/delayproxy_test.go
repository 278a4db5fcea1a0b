package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// The proxy's own timing is what these tests hold, with a lower bound
// that cannot flake (the proxy holds every chunk at least its delay after
// reading it, and it reads it after it was sent) and an upper bound on
// the quickest of several exchanges, generous enough for a loaded
// two-core machine (slack).
const slack = 100 * time.Millisecond

// A TCP proxy makes a connection cost its handshake's round trip, delays
// each direction by the one-way time, and a ping through it measures as
// its RTT.
func TestDelayProxyTCPDelaysBothWays(t *testing.T) {
	const rtt = 200 * time.Millisecond
	ow := rtt / 2
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	px, err := newDelayProxy("tcp", ln.Addr().String(), pathModel{rtt: rtt})
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()

	arrivals := make(chan time.Time, 16)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		accepted <- c
		b := make([]byte, 1)
		for {
			if _, err := c.Read(b); err != nil {
				return
			}
			arrivals <- time.Now()
			if b[0] == 'p' {
				c.Write(b)
			}
		}
	}()
	start := time.Now()
	c, err := net.Dial("tcp", px.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write([]byte{'a'}); err != nil {
		t.Fatal(err)
	}
	// The client's first byte reaches the server after the SYN's round
	// trip and its own one-way time, as on a wire.
	if d := (<-arrivals).Sub(start); d < rtt+ow {
		t.Errorf("the first byte arrived %s after the dial, before the handshake's RTT and the one-way time (%s)", d, rtt+ow)
	}
	srv := <-accepted
	defer srv.Close()

	var toServer, toClient, ping []time.Duration
	b := make([]byte, 1)
	for range 5 {
		sent := time.Now()
		if _, err := c.Write([]byte{'b'}); err != nil {
			t.Fatal(err)
		}
		toServer = append(toServer, (<-arrivals).Sub(sent))

		sent = time.Now()
		if _, err := srv.Write([]byte{'s'}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		toClient = append(toClient, time.Since(sent))

		sent = time.Now()
		if _, err := c.Write([]byte{'p'}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil || b[0] != 'p' {
			t.Fatalf("ping: %q, %v", b, err)
		}
		<-arrivals
		ping = append(ping, time.Since(sent))
	}
	checkDelays(t, "client to server", toServer, ow)
	checkDelays(t, "server to client", toClient, ow)
	checkDelays(t, "ping", ping, rtt)
	if px.accepted.Load() != 1 {
		t.Errorf("the proxy counts %d connections, want 1", px.accepted.Load())
	}
}

// checkDelays fails unless every delay is at least want and the quickest
// is within slack of it.
func checkDelays(t *testing.T, what string, ds []time.Duration, want time.Duration) {
	t.Helper()
	fastest := ds[0]
	for _, d := range ds {
		if d < want {
			t.Errorf("%s took %s, less than the %s the proxy makes it: %v", what, d, want, ds)
		}
		fastest = min(fastest, d)
	}
	if fastest >= want+slack {
		t.Errorf("%s: the quickest of %v is %s, not within %s of %s", what, ds, fastest, slack, want)
	}
}

// A UDP proxy delays each datagram by the one-way time, both ways, and a
// ping through it measures as its RTT.
func TestDelayProxyUDPDelaysBothWays(t *testing.T) {
	const rtt = 200 * time.Millisecond
	ow := rtt / 2
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	px, err := newDelayProxy("udp", srv.LocalAddr().String(), pathModel{rtt: rtt})
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()
	type arrival struct {
		at   time.Time
		from *net.UDPAddr
	}
	arrivals := make(chan arrival, 16)
	go func() {
		b := make([]byte, 16)
		for {
			n, from, err := srv.ReadFromUDP(b)
			if err != nil {
				return
			}
			arrivals <- arrival{time.Now(), from}
			if n == 1 && b[0] == 'p' {
				srv.WriteToUDP(b[:1], from)
			}
		}
	}()
	c, err := net.Dial("udp", px.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	var toServer, toClient, ping []time.Duration
	b := make([]byte, 16)
	for range 5 {
		sent := time.Now()
		if _, err := c.Write([]byte{'b'}); err != nil {
			t.Fatal(err)
		}
		a := <-arrivals
		toServer = append(toServer, a.at.Sub(sent))

		sent = time.Now()
		if _, err := srv.WriteToUDP([]byte{'s'}, a.from); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(b); err != nil {
			t.Fatal(err)
		}
		toClient = append(toClient, time.Since(sent))

		sent = time.Now()
		if _, err := c.Write([]byte{'p'}); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(b); err != nil || n != 1 || b[0] != 'p' {
			t.Fatalf("ping: %q, %v", b[:n], err)
		}
		<-arrivals
		ping = append(ping, time.Since(sent))
	}
	checkDelays(t, "client to server", toServer, ow)
	checkDelays(t, "server to client", toClient, ow)
	checkDelays(t, "ping", ping, rtt)
	if px.accepted.Load() != 1 {
		t.Errorf("the proxy counts %d flows, want 1 (one client address)", px.accepted.Load())
	}
}

// A megabyte through a TCP proxy and back comes out whole and in order,
// the end of the stream is passed on, and the proxy counts the bytes.
func TestDelayProxyTCPKeepsOrder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c) // to the client's EOF, which the proxy passes on
		c.Close()
	}()
	px, err := newDelayProxy("tcp", ln.Addr().String(), pathModel{rtt: 4 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()
	c, err := net.Dial("tcp", px.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	want := make([]byte, 1<<20)
	rand.Read(want)
	go func() {
		c.Write(want)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c) // ends when the server's close comes through
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%d bytes came back, not the %d sent in their order", len(got), len(want))
	}
	if up, down := px.up.Load(), px.down.Load(); up != 1<<20 || down != 1<<20 {
		t.Errorf("the proxy counts %d bytes up and %d down, want %d each", up, down, 1<<20)
	}
}

// Loss drops UDP datagrams and, for TCP, holds chunks back a
// retransmission timeout (and the handshake the initial one).
func TestDelayProxyLoss(t *testing.T) {
	const rtt = 20 * time.Millisecond
	t.Run("udp", func(t *testing.T) {
		srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		px, err := newDelayProxy("udp", srv.LocalAddr().String(), pathModel{rtt: rtt, loss: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer px.close()
		c, err := net.Dial("udp", px.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range 5 {
			if _, err := c.Write([]byte("lost")); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(time.Minute)
		for px.lost.Load() < 5 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // polling observable state: the proxy reads in the background
		}
		if lost, up := px.lost.Load(), px.up.Load(); lost != 5 || up != 20 {
			t.Errorf("at 100 %% loss: %d datagrams lost of %d bytes read, want all 5 (20 bytes)", lost, up)
		}
	})
	t.Run("tcp", func(t *testing.T) {
		m := pathModel{rtt: rtt, loss: 1}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.Copy(c, c)
			c.Close()
		}()
		px, err := newDelayProxy("tcp", ln.Addr().String(), m)
		if err != nil {
			t.Fatal(err)
		}
		defer px.close()
		start := time.Now()
		c, err := net.Dial("tcp", px.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		b := []byte{1}
		for i := range 2 {
			sent := time.Now()
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, b); err != nil {
				t.Fatal(err)
			}
			// Both ways lost: a timeout each way; the first exchange
			// also waits for the lost handshake.
			want := m.rtt + 2*m.rto()
			d := time.Since(sent)
			if i == 0 {
				want, d = want+m.rtt+synRTO, time.Since(start)
			}
			if d < want {
				t.Errorf("exchange %d at 100 %% loss took %s, less than %s", i, d, want)
			}
		}
		if px.lost.Load() != 5 {
			t.Errorf("%d losses counted, want 5 (the handshake, then two chunks each way)", px.lost.Load())
		}
	})
}
