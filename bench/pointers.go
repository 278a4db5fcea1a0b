package main

// pointerSection is row 5: the DHT and gossip figures come from node's
// tests, which build the networks they need and log what they measure.
func pointerSection() section {
	return section{title: "5. Capability lookup and update propagation (measured by node's tests, not here)",
		rows: []row{
			{key: "dht.find", unit: unitTest, base: "-", name: "DHT Find across 100 nodes (k=20 and k=4)",
				note: "cd .. && go test ./node/capdht -run TestDHTFindAt100Nodes -count=1 -v   (logs lookup time and hops)"},
			{key: "gossip.update", unit: unitTest, base: "-", name: "gossip update reaching every subscriber",
				note: "cd .. && go test ./node/discovery -run TestGossipUpdateReachesEverySubscriber -count=1 -v   (logs propagation time)"},
		}}
}
