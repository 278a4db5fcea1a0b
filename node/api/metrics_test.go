package api

import (
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/nodetest"
)

// tokenOf is the daemon's control API token, as a scraper reads it from
// the token file.
func tokenOf(t *testing.T, h config.Home) string {
	t.Helper()
	tok, err := readToken(TokenFile(h))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(tok))
}

// peerIDish matches what would identify a peer or a conversation in a
// label value: a libp2p peer ID, a did:key, a message or conversation ID.
var peerIDish = regexp.MustCompile(`12D3KooW|Qm[1-9A-HJ-NP-Za-km-z]{20,}|did:key|z6Mk|conv:|msg:`)

// TestMetrics scrapes GET /metrics on the control API, with the token in
// the header, while two real daemons greet: the greeting counters of both
// sides and the door's step histograms move, a refusal is counted by its
// step and code, and no label value names a peer or a conversation.
// Without the token the answer is 401 and carries no figure.
func TestMetrics(t *testing.T) {
	alice := startDaemon(t, nodetest.AliceConfig())
	bob := startDaemon(t, nil)
	ctx := testContext(t)
	aliceURL, bobURL := "http://"+alice.srv.Addr()+"/metrics", "http://"+bob.srv.Addr()+"/metrics"
	aliceToken, bobToken := tokenOf(t, alice.home), tokenOf(t, bob.home)

	status, fams, body := nodetest.Scrape(t, aliceURL, "")
	if status != http.StatusUnauthorized || fams != nil || strings.Contains(body, "ifaced_") {
		t.Fatalf("GET /metrics without the token: %d\n%s", status, body)
	}
	if status, _, body := nodetest.Scrape(t, aliceURL, bobToken); status != http.StatusUnauthorized {
		t.Fatalf("GET /metrics with another daemon's token: %d\n%s", status, body)
	}

	_, before, _ := nodetest.Scrape(t, aliceURL, aliceToken)
	for _, family := range []string{"ifaced_peers_connected", "ifaced_peers_greeted", "ifaced_conversations_open",
		"ifaced_door_step_duration_seconds", "ifaced_audit_used_bytes", "ifaced_audit_quota_bytes", "ifaced_store_bytes",
		"ifaced_memory_budget_bytes", "ifaced_memory_budget_used_bytes", "ifaced_relay_reservations_held",
		"ifaced_mailbox_held_messages", "ifaced_mailbox_held_bytes", "ifaced_outbox_messages",
		"ifaced_memory_cache_entries", "ifaced_memory_cache_bytes", "ifaced_memory_cache_budget_bytes",
		"go_goroutines", "process_resident_memory_bytes"} {
		if before[family] == nil {
			t.Errorf("no %s in the exposition", family)
		}
	}

	// The greeting, with scrapes of both daemons going on meanwhile: each
	// parses, and no counter goes down.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, d := range []struct{ url, token string }{{aliceURL, aliceToken}, {bobURL, bobToken}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := -1.0
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, f, body := nodetest.Scrape(t, d.url, d.token)
				if status != http.StatusOK {
					t.Errorf("a scrape during the greeting: %d %s", status, body)
					return
				}
				n := f.Value("ifaced_greetings_total")
				if n < last {
					t.Errorf("ifaced_greetings_total went down from %v to %v", last, n)
				}
				last = n
			}
		}()
	}
	aliceEvents, unsubscribe := alice.n.Subscribe(events.AsObserver())
	defer unsubscribe()
	if _, err := bob.n.Connect(ctx, alice.n.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	res, err := bob.n.Greet(ctx, alice.n.ID().PeerID(), negotiate.Proposal{})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// Alice counts her side once she has answered, before she opens the
	// conversation (and says so).
	nodetest.WaitEvent(t, aliceEvents, func(e events.Event) bool {
		return e.Type == events.EventConversation && e.ConversationID == res.ConversationID && e.Detail == "open"
	})

	_, after, _ := nodetest.Scrape(t, aliceURL, aliceToken)
	_, bobs, _ := nodetest.Scrape(t, bobURL, bobToken)
	moved := func(what string, before, after nodetest.Families, want float64, family string, labels ...string) {
		t.Helper()
		if d := after.Value(family, labels...) - before.Value(family, labels...); d != want {
			t.Errorf("%s: %s%v moved by %v, want %v", what, family, labels, d, want)
		}
	}
	moved("alice answered a greeting", before, after, 1, "ifaced_greetings_total", "direction", "in", "kind", "conversation", "outcome", "ok")
	moved("bob greeted", nil, bobs, 1, "ifaced_greetings_total", "direction", "out", "kind", "conversation", "outcome", "ok")
	// A greeting from a stranger passes every step the door times once:
	// room and strangers_room (a greeting), rate (charged), fit.
	for _, step := range []string{"room", "validate", "establish", "verify", "strangers_room", "replay", "rate", "fit", "audit"} {
		moved("alice's door", before, after, 1, "ifaced_door_step_duration_seconds", "step", step)
	}
	// Bob's door admitted alice's answer, also a greeting.
	if bobs.Value("ifaced_door_step_duration_seconds", "step", "verify") < 1 {
		t.Errorf("bob's door timed no verify step")
	}
	if got := after.Value("ifaced_conversations_open"); got != 1 {
		t.Errorf("alice: %v conversations open, want 1", got)
	}
	if got := after.Value("ifaced_peers_greeted"); got != 1 {
		t.Errorf("alice: %v peers greeted, want 1", got)
	}
	if got := after.Value("ifaced_peers_connected"); got != 1 {
		t.Errorf("alice: %v peers connected, want 1", got)
	}
	if after.Value("ifaced_audit_used_bytes", "share", "strangers") <= before.Value("ifaced_audit_used_bytes", "share", "strangers") {
		t.Errorf("alice's audit of a stranger's greeting did not grow the strangers' share: %v → %v",
			before.Value("ifaced_audit_used_bytes", "share", "strangers"), after.Value("ifaced_audit_used_bytes", "share", "strangers"))
	}
	// Bob is a stranger to alice: his verified view is held, and his peer
	// record kept, in the memories strangers fill, each within its budget.
	for _, cache := range []string{"held_views", "peer_records"} {
		if n := after.Value("ifaced_memory_cache_entries", "cache", cache); n < 1 {
			t.Errorf("alice's %s hold %v entries after a stranger's greeting, want at least 1", cache, n)
		}
	}
	for _, cache := range []string{"peer_records", "held_views", "sent_views", "trust_records", "signed_views", "canonical", "decoded", "indented"} {
		used, budget := after.Value("ifaced_memory_cache_bytes", "cache", cache), after.Value("ifaced_memory_cache_budget_bytes", "cache", cache)
		if budget <= 0 || used > budget {
			t.Errorf("alice's %s: %v bytes used of a budget of %v", cache, used, budget)
		}
	}

	// Alice revokes bob's key: his next greeting is refused at the verify
	// step, counted with its code on her side and his.
	if err := alice.c.call(ctx, http.MethodPost, "/v1/trust/"+bob.peerID(), map[string]any{"revoke": true}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.n.Greet(ctx, alice.n.ID().PeerID(), negotiate.Proposal{}); err == nil {
		t.Fatal("a revoked key's greeting was taken")
	}
	_, refused, _ := nodetest.Scrape(t, aliceURL, aliceToken)
	moved("alice refused bob", after, refused, 1, "ifaced_door_refusals_total", "step", "verify", "code", "key_revoked")
	moved("alice refused bob", after, refused, 1, "ifaced_greetings_total", "direction", "in", "outcome", "key_revoked")
	_, bobs2, _ := nodetest.Scrape(t, bobURL, bobToken)
	moved("bob was refused", bobs, bobs2, 1, "ifaced_greetings_total", "direction", "out", "outcome", "key_revoked")

	// Every greeting, refusal and step above found its place among the
	// fixed label values.
	for _, f := range []nodetest.Families{after, bobs, refused, bobs2} {
		if _, ok := f["ifaced_figures_uncounted_total"]; !ok {
			t.Error("the scrape has no ifaced_figures_uncounted_total")
		} else if n := f.Value("ifaced_figures_uncounted_total"); n != 0 {
			t.Errorf("ifaced_figures_uncounted_total is %v after a greeting and a refusal, want 0", n)
		}
	}
	// No label value names a peer or a conversation.
	for _, f := range []nodetest.Families{after, bobs, refused, bobs2} {
		for v, where := range f.LabelValues() {
			if peerIDish.MatchString(v) || strings.Contains(v, res.ConversationID) || strings.Contains(v, alice.peerID()) || strings.Contains(v, bob.peerID()) {
				t.Errorf("%s carries %q, which names a peer or a conversation", where, v)
			}
		}
	}
}
