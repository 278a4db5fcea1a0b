package metrics

import (
	"github.com/ifaced/ifaced/node/internal/tally"
	"github.com/prometheus/client_golang/prometheus"
)

// The families of ifaced's own figures. Units are in the names
// (_seconds, _bytes), counters end in _total, as Prometheus names them.
var (
	peersConnectedDesc = prometheus.NewDesc("ifaced_peers_connected",
		"Peers with at least one open libp2p connection to this daemon.", nil, nil)
	peersGreetedDesc = prometheus.NewDesc("ifaced_peers_greeted",
		"Connected peers this daemon has exchanged verified greetings with on their current connections.", nil, nil)
	conversationsOpenDesc = prometheus.NewDesc("ifaced_conversations_open",
		"Conversations open now (in the conversation table, neither side having closed them).", nil, nil)
	greetingsDesc = prometheus.NewDesc("ifaced_greetings_total",
		"Greeting exchanges, by direction (in: a peer greeted this daemon; out: this daemon greeted), kind (conversation, or query for a capabilities query) "+
			"and outcome (ok, the wire code it was refused with, sent or received, or failed when it broke off without one).",
		[]string{"direction", "kind", "outcome"}, nil)
	invocationsDesc = prometheus.NewDesc("ifaced_invocations_total",
		"Capability requests, by direction (in: run by this daemon for a peer or an HTTP caller, every transport; out: sent by this daemon) "+
			"and outcome (ok, the wire code of the refusal, or failed when no answer came).",
		[]string{"direction", "outcome"}, nil)
	doorStepDesc = prometheus.NewDesc("ifaced_door_step_duration_seconds",
		"Time each step of the admission pipeline took, for every inbound message the step applied to (room and strangers_room: greetings; rate: charged messages; fit: messages the transport fits), refused there or passed on.",
		[]string{"step"}, nil)
	refusalsDesc = prometheus.NewDesc("ifaced_door_refusals_total",
		"Inbound messages the door refused, by the step that refused them (decode: the transport's bounded decode; commit: a race for the conversation after the audit) and the wire code they were answered with; "+
			"counted whether or not the record of refusals had room to write them.",
		[]string{"step", "code"}, nil)
	auditUsedDesc = prometheus.NewDesc("ifaced_audit_used_bytes",
		"Bytes the audit log's day directories take on disk, counted in whole 4 KiB blocks as the quota counts them: all files, and the strangers' files (peers the owner has not made known).",
		[]string{"share"}, nil)
	auditQuotaDesc = prometheus.NewDesc("ifaced_audit_quota_bytes",
		"The audit log's quota (audit.max_mb) and the strangers' share of it, in bytes.", []string{"share"}, nil)
	storeDesc = prometheus.NewDesc("ifaced_store_bytes",
		"Size of the store file (ifaced.db: peer cache, trust, seen message IDs, mailboxes, outbox).", nil, nil)
	budgetUsedDesc = prometheus.NewDesc("ifaced_memory_budget_used_bytes",
		"Bytes of the decoding budget that inbound messages hold now while they are decoded and verified: all, and the strangers' share.",
		[]string{"share"}, nil)
	budgetDesc = prometheus.NewDesc("ifaced_memory_budget_bytes",
		"The decoding budget (half of limits.max_memory_mb, at least 48 MiB) and the part strangers share (three quarters).", []string{"share"}, nil)
	relayReservationsDesc = prometheus.NewDesc("ifaced_relay_service_reservations",
		"Circuit relay v2 slots peers hold on this daemon's relay service (relay.service).", nil, nil)
	relayCircuitsDesc = prometheus.NewDesc("ifaced_relay_service_circuits",
		"Relayed connections open through this daemon's relay service.", nil, nil)
	relayHeldDesc = prometheus.NewDesc("ifaced_relay_reservations_held",
		"Slots this daemon holds on the relays it uses (relay.use).", nil, nil)
	mailHeldDesc = prometheus.NewDesc("ifaced_mailbox_held_messages",
		"Messages this daemon's mailboxes hold for peers that are away (as a relay with relay.mailbox).", nil, nil)
	mailHeldBytesDesc = prometheus.NewDesc("ifaced_mailbox_held_bytes",
		"Bytes of the messages this daemon's mailboxes hold for others (mailbox.max_total_mb bounds them).", nil, nil)
	outboxDesc = prometheus.NewDesc("ifaced_outbox_messages",
		"Messages this daemon queued for peers it could not reach, waiting to be delivered through their mailboxes.", nil, nil)
	dhtDesc = prometheus.NewDesc("ifaced_dht_routing_table_peers",
		"DHT servers in the capability DHT's routing table (absent when discovery.dht is off).", nil, nil)
	uncountedDesc = prometheus.NewDesc("ifaced_figures_uncounted_total",
		"Events a figure above could not place (an outcome, step or code outside its fixed list of label values). Always 0 unless ifaced has a bug: report it if it is not.", nil, nil)
	memoryEntriesDesc = prometheus.NewDesc("ifaced_memory_cache_entries",
		"Entries each bounded memory of what peers make the daemon remember holds now (cache: peer_records, held_views, sent_views and trust_records of peers nobody made known, "+
			"signed_views by class, and the process-wide memos canonical, decoded and indented).", []string{"cache"}, nil)
	memoryUsedDesc = prometheus.NewDesc("ifaced_memory_cache_bytes",
		"Bytes the entries of each bounded memory are counted as against its budget (an estimate of what they hold; see docs/soak.md).", []string{"cache"}, nil)
	memoryBudgetDesc = prometheus.NewDesc("ifaced_memory_cache_budget_bytes",
		"The budget of each bounded memory: past it, the least recently used entries are evicted.", []string{"cache"}, nil)
	gossipDesc = prometheus.NewDesc("ifaced_gossip_peers",
		"Peers on the capabilities.update announcement topic: those known to subscribe to it, and those in this daemon's mesh (absent when discovery.gossip is off).",
		[]string{"set"}, nil)
)

// Label values of the share and set labels.
const (
	shareAll       = "all"
	shareStrangers = "strangers"
)

// figures collects ifaced's own families from the components at scrape
// time.
type figures struct{ d Deps }

func newFigures(d Deps) *figures { return &figures{d: d} }

var allDescs = []*prometheus.Desc{peersConnectedDesc, peersGreetedDesc, conversationsOpenDesc, greetingsDesc, invocationsDesc,
	doorStepDesc, refusalsDesc, auditUsedDesc, auditQuotaDesc, storeDesc, budgetUsedDesc, budgetDesc,
	relayReservationsDesc, relayCircuitsDesc, relayHeldDesc, mailHeldDesc, mailHeldBytesDesc, outboxDesc, dhtDesc, gossipDesc, uncountedDesc,
	memoryEntriesDesc, memoryUsedDesc, memoryBudgetDesc}

func (f *figures) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func (f *figures) Collect(ch chan<- prometheus.Metric) {
	d := f.d
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}

	gauge(peersConnectedDesc, float64(len(d.Peers.Peers())))
	gauge(peersGreetedDesc, float64(d.Conversations.GreetedPeers()))
	gauge(conversationsOpenDesc, float64(d.Conversations.OpenCount()))
	d.Conversations.Greetings().Each(func(v []string, n uint64) { counter(greetingsDesc, n, v...) })
	d.Invocations.Served().Each(func(v []string, n uint64) { counter(invocationsDesc, n, "in", v[0]) })
	d.Conversations.Requested().Each(func(v []string, n uint64) { counter(invocationsDesc, n, "out", v[0]) })

	d.Door.Latencies().Each(func(step string, s tally.Snapshot) {
		m, err := prometheus.NewConstHistogram(doorStepDesc, s.Count, s.Sum, s.Buckets, step)
		if err != nil {
			m = prometheus.NewInvalidMetric(doorStepDesc, err)
		}
		ch <- m
	})
	d.Door.Refusals().Each(func(v []string, n uint64) { counter(refusalsDesc, n, v...) })
	counter(uncountedDesc, d.Conversations.Greetings().Stray()+d.Conversations.Requested().Stray()+
		d.Invocations.Served().Stray()+d.Door.Latencies().Stray()+d.Door.Refusals().Stray())

	gauge(auditUsedDesc, float64(d.Audit.Usage()), shareAll)
	gauge(auditUsedDesc, float64(d.Audit.StrangersUsage()), shareStrangers)
	gauge(auditQuotaDesc, float64(d.AuditQuota), shareAll)
	gauge(auditQuotaDesc, float64(d.StrangerShare), shareStrangers)
	if n, err := d.Store.Size(); err != nil {
		ch <- prometheus.NewInvalidMetric(storeDesc, err)
	} else {
		gauge(storeDesc, float64(n))
	}

	size, strangers := d.Budget.Size()
	gauge(budgetDesc, float64(size), shareAll)
	gauge(budgetDesc, float64(strangers), shareStrangers)
	used, strangersUsed := d.Budget.Used()
	gauge(budgetUsedDesc, float64(used), shareAll)
	gauge(budgetUsedDesc, float64(strangersUsed), shareStrangers)

	for _, m := range d.Memories {
		f := m.Fill()
		gauge(memoryEntriesDesc, float64(f.Entries), m.Name)
		gauge(memoryUsedDesc, float64(f.Used), m.Name)
		gauge(memoryBudgetDesc, float64(f.Budget), m.Name)
	}

	r := d.Mail.RelayFigures()
	if r.Service {
		gauge(relayReservationsDesc, float64(r.Reservations))
		gauge(relayCircuitsDesc, float64(r.Circuits))
	}
	gauge(relayHeldDesc, float64(r.Held))
	if q, err := d.Mail.Queues(); err != nil {
		ch <- prometheus.NewInvalidMetric(mailHeldDesc, err)
	} else {
		gauge(mailHeldDesc, float64(q.Held))
		gauge(mailHeldBytesDesc, float64(q.HeldBytes))
		gauge(outboxDesc, float64(q.Outbox))
	}

	if n, on := d.Discovery.RoutingTableSize(); on {
		gauge(dhtDesc, float64(n))
	}
	if subscribed, mesh, on := d.Discovery.GossipPeers(); on {
		gauge(gossipDesc, float64(subscribed), "subscribed")
		gauge(gossipDesc, float64(mesh), "mesh")
	}
}
