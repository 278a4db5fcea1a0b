package main

import (
	"context"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
)

// rotationRows times warm greetings from the first len(peers)-1 peers in
// rotation, against warm greetings from the last peer alone, on one
// ifaced child: rotation.<n> and rotation.one_peer. Every peer first
// greets once (untimed), so every timed greeting is warm for its sender:
// it holds the daemon's view and the daemon was told it holds the
// sender's. What the daemon keeps per peer (signed views, verified views)
// either survives n-1 other peers' greetings or does not: the ratio says
// which.
func rotationRows(ctx context.Context, root string, peers []host.Host, gs []greeter, timed int) []row {
	n := len(peers) - 1
	key := fmt.Sprintf("rotation.%d", n)
	name := fmt.Sprintf("warm greeting, %s peers in rotation", fmtCount(n))
	one, oneName := "rotation.one_peer", "warm greeting, one peer"
	fail := func(err error) []row {
		return []row{failed(one, oneName, err), failed(key, name, err)}
	}
	c, err := startChild(childSpec{Role: roleIfaced, Dir: root, ConnsHigh: 2 * len(peers)})
	if err != nil {
		return fail(err)
	}
	defer c.stop()
	if s := fdShortfall(len(peers), c.fds); s != "" {
		return fail(fmt.Errorf("the child's %s", s))
	}
	addr, err := c.addr(tcpTransport)
	if err != nil {
		return fail(err)
	}
	info, err := p2pInfo(addr)
	if err != nil {
		return fail(err)
	}
	if bad, err := dialAll(ctx, peers, info); bad > 0 {
		return fail(fmt.Errorf("%d of %d peers did not connect, first: %w", bad, len(peers), err))
	}
	defer func() {
		for _, p := range peers {
			p.Network().ClosePeer(info.ID)
			p.Peerstore().RemovePeer(info.ID)
		}
	}()
	clients, err := greetClients(peers, gs, info.ID)
	if err != nil {
		return fail(err)
	}
	if _, bad, err := greetAll(ctx, clients); bad > 0 {
		return fail(fmt.Errorf("%d of %d first greetings failed, first: %w", bad, len(peers), err))
	}
	if st, err := c.command("stats"); err != nil {
		return fail(err)
	} else if st.Conns < len(peers) {
		return fail(fmt.Errorf("the daemon holds %d connections of the %d peers'", st.Conns, len(peers)))
	}

	rotating, single := clients[:n], clients[n]
	var next, rotViews, rotCount, oneViews, oneCount int
	greet := func(c *greetClient, views, count *int) (time.Duration, error) {
		start := time.Now()
		came, err := c.greet(ctx)
		if err != nil {
			return 0, err
		}
		d := time.Since(start)
		*count++
		if came {
			*views++
		}
		return d, nil
	}
	rot := &variant{key: key, name: name, once: func() (time.Duration, error) {
		c := rotating[next%n]
		next++
		return greet(c, &rotViews, &rotCount)
	}}
	alone := &variant{key: one, name: oneName, once: func() (time.Duration, error) { return greet(single, &oneViews, &oneCount) }}
	interleave([]*variant{alone, rot}, 3, max(timed, n), 10, func() bool { return ctx.Err() != nil })
	return []row{
		rowOf(alone, fmt.Sprintf("a peer outside the rotation; answers carrying the daemon's view again: %d of %d", oneViews, oneCount)),
		withBase(rowOf(rot, fmt.Sprintf("each peer greets after the %s others; answers carrying the daemon's view again: %d of %d", fmtCount(n-1), rotViews, rotCount)), one),
	}
}

// withBase sets the row x's ratio is against.
func withBase(x row, base string) row {
	x.base = base
	return x
}

// fmtCount writes a count with thousands separated: 5,000.
func fmtCount(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
