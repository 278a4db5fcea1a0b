package main

import "context"

// pointerSection is row 5 without its measured gossip rows: the DHT's
// figure comes from node's test, which builds the network it needs and
// logs what it measures.
func pointerSection() section {
	return section{title: "5. Capability lookup and update propagation",
		rows: []row{
			{key: "dht.find", unit: unitTest, base: "-", name: "DHT Find across 100 nodes (k=20 and k=4)",
				note: "cd .. && go test ./node/capdht -run TestDHTFindAt100Nodes -count=1 -v   (logs lookup time and hops)"},
		}}
}

// lookupSection is row 5: the DHT pointer, and update propagation
// measured by the lab's test among subscribers hosts (gossipRows), judged
// against the one-way link time of the same run. quick leaves the gossip
// rows out (500 hosts take a minute or two).
func lookupSection(ctx context.Context, subscribers int, quick bool) section {
	s := pointerSection()
	s.baseline = gossipOneWayKey
	if quick {
		s.rows = append(s.rows, notMeasured(gossipReachKey(subscribers), "update propagation among GossipSub subscribers", "skipped by -quick (run without it, or with -rows 5)"))
		return s
	}
	repo, err := repoRoot()
	if err != nil {
		s.rows = append(s.rows, failed(gossipReachKey(subscribers), "update propagation", err))
		return s
	}
	s.rows = append(s.rows, gossipRows(ctx, repo, subscribers)...)
	return s
}
