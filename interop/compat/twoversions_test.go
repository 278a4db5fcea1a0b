package compat

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/examples/agent"
	"golang.org/x/mod/semver"
)

// TestTwoVersions runs the previous release's binary (built from its commit
// in releases.txt)
// and this tree's as real processes on loopback, each driven by its own
// command line, and checks everything two owners on different versions
// do with each other:
//
//   - each greets the other (a conversation each way);
//   - each adds capabilities at run time (caps add), and the other sees
//     the new view arrive as an update push in the open conversation;
//   - each invokes the other's new capability (an agent behind a webhook
//     answers) and gets the answer;
//   - each sends text while the other is away: it is left at the other's
//     mailbox at a relay, and fetched when the other comes back. The
//     relay runs the previous release, so this tree's daemon deposits at
//     and fetches from an old mailbox, and the old daemons at a new one
//     (the subtest runs the relay in each version);
//   - each says text in the open conversation: it is reported said, and
//     no acknowledgement goes either way (the older side says nothing of
//     them; node/wire: Acknowledgements).
func TestTwoVersions(t *testing.T) {
	if os.Getenv("IFACED_COMPAT") == "" && !requireCompat() {
		t.Skip("builds the previous release and runs five daemons, minutes on a busy machine: IFACED_COMPAT=1 runs it (.ci/run does, with IFACED_REQUIRE_COMPAT=1)")
	}
	if testing.Short() {
		t.Skip("builds the previous release and runs five daemons; not in -short")
	}
	root := repoRoot(t)
	rel := previousRelease(t, root)
	prev := rel.tag
	if prev == "" {
		t.Skip("HEAD is the first release: there is no previous one to run against")
	}
	start := time.Now()
	oldBin, oldSrc := releaseBinary(t, root, rel)
	newBin := headBinary(t, root)
	t.Logf("previous release %s; both binaries ready in %.1f s", prev, time.Since(start).Seconds())
	if v := binaryVersion(t, oldBin); v != prev {
		t.Errorf("the %s binary built from its commit says version %q, want %q", prev, v, prev)
	}
	if v := binaryVersion(t, newBin); v != "dev" && semver.Compare(v, prev) <= 0 {
		t.Errorf("this tree's binary says version %q, not above the previous release %s", v, prev)
	}

	hook := httptest.NewServer(agent.Handler(nil))
	defer hook.Close()
	for _, relayVersion := range []string{"old", "new"} {
		t.Run("relay "+relayVersion, func(t *testing.T) {
			bins := map[string]string{"old": oldBin, "new": newBin}
			capsFile := map[string]string{oldBin: filepath.Join(oldSrc, "examples", "agent", "capabilities.toml"),
				newBin: filepath.Join(root, "examples", "agent", "capabilities.toml")}
			began := time.Now()

			relayPort := freePort(t)
			relay := newDaemon(t, bins[relayVersion], "relay-"+relayVersion, baseConfig(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", relayPort))+
				"[relay]\nservice = true\nmailbox = true\n")
			relay.start()
			relayAddr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", relayPort, relay.peerID)
			// Each side listens on nothing of its own: it is reached
			// through its slot at the relay, whose mailbox holds its mail
			// while it is away.
			peerConfig := baseConfig() + fmt.Sprintf("[relay]\nuse = [%q]\n\n[agent]\nwebhook = %q\n", relayAddr, hook.URL)
			old := newDaemon(t, oldBin, "old", peerConfig)
			cur := newDaemon(t, newBin, "new", peerConfig)
			old.start()
			cur.start()

			for _, c := range []struct{ from, to *daemon }{{old, cur}, {cur, old}} {
				from, to := c.from, c.to
				name := from.name + "→" + to.name

				// Greeting, through the relay.
				var addr string
				waitFor(t, to.name+" to hold its relay slot", 30*time.Second, func() bool {
					a := to.addrs()
					if len(a) > 0 {
						addr = a[0]
					}
					return strings.Contains(addr, relay.peerID+"/p2p-circuit")
				})
				from.must("connect", addr)
				var greeting struct {
					ConversationID string `json:"conversation_id"`
				}
				out := from.must("greet", to.peerID, "--json")
				if err := json.Unmarshal([]byte(out), &greeting); err != nil || greeting.ConversationID == "" {
					t.Fatalf("%s: greet --json: %v\n%s", name, err, out)
				}
				waitFor(t, name+": the greeting in "+to.name+"'s audit log", 10*time.Second, func() bool {
					return to.auditedConversation(from.peerID, greeting.ConversationID)
				})

				// Update push: to adds capabilities; from holds the new
				// view without asking for it.
				before := from.peerSeq(to.peerID)
				if before == 0 {
					t.Fatalf("%s: %s holds no view of %s after greeting it", name, from.name, to.name)
				}
				if _, err := to.run("caps", "add", capsFile[to.bin]); err != nil && !strings.Contains(err.Error(), "already") {
					t.Fatal(err)
				}
				waitFor(t, name+": "+to.name+"'s update push reaching "+from.name, 15*time.Second, func() bool {
					return from.peerSeq(to.peerID) > before
				})

				// Invocation of the new capability, answered by to's agent.
				out = from.must("invoke", to.peerID, "doc.summarize", "--params", `{"text": "one two three", "max_words": 2}`)
				if !strings.Contains(out, `"summary": "one two"`) {
					t.Errorf("%s: invoke doc.summarize answered:\n%s", name, out)
				}

				// Said in the open conversation: the older side says
				// nothing of acknowledgements, so none is sent or waited
				// for, and the send reports the message said.
				var said struct {
					ConversationID string `json:"conversation_id"`
					MessageID      string `json:"message_id"`
					Delivered      string `json:"delivered"`
				}
				from.json(&said, "send", to.peerID, "--text", "said in the conversation, by "+from.name)
				if said.Delivered != "conversation" {
					t.Fatalf("%s: send in the open conversation: %+v, want said in the conversation", name, said)
				}
				waitFor(t, name+": the said message in "+to.name+"'s audit log", 10*time.Second, func() bool {
					var conv struct {
						Entries []json.RawMessage `json:"entries"`
					}
					to.json(&conv, "audit", "--conversation", said.ConversationID)
					for _, e := range conv.Entries {
						if strings.Contains(string(e), said.MessageID) {
							return true
						}
					}
					return false
				})
				for _, d := range []*daemon{from, to} {
					var conv struct {
						Entries []json.RawMessage `json:"entries"`
					}
					d.json(&conv, "audit", "--conversation", said.ConversationID)
					for _, e := range conv.Entries {
						if acknowledgement.Match(e) {
							t.Errorf("%s: %s's audit log holds an acknowledgement, in a conversation with an older daemon: %s", name, d.name, e)
						}
					}
				}

				// Mail: to goes away; from's text waits at to's mailbox,
				// and to fetches it when it comes back.
				to.stop()
				var sent struct {
					ConversationID string `json:"conversation_id"`
					Delivered      string `json:"delivered"`
				}
				text := "while you were away, from " + from.name
				from.json(&sent, "send", to.peerID, "--text", text)
				if sent.Delivered != "queued" {
					t.Fatalf("%s: send while %s is away: %+v, want queued", name, to.name, sent)
				}
				waitFor(t, name+": the message leaving "+from.name+"'s outbox for the mailbox", 30*time.Second, func() bool {
					var ob struct {
						Messages []json.RawMessage `json:"messages"`
					}
					from.json(&ob, "outbox")
					return len(ob.Messages) == 0
				})
				to.start()
				waitFor(t, name+": "+to.name+" fetching and auditing its mail", 30*time.Second, func() bool {
					return to.auditedConversation(from.peerID, sent.ConversationID)
				})
				var conv struct {
					Entries []json.RawMessage `json:"entries"`
				}
				to.json(&conv, "audit", "--conversation", sent.ConversationID)
				if len(conv.Entries) == 0 || !strings.Contains(string(conv.Entries[0]), text) {
					t.Errorf("%s: the fetched message in %s's audit log: %s", name, to.name, conv.Entries)
				}
			}
			for _, d := range []*daemon{old, cur, relay} {
				if strings.Contains(d.Log(), "level=ERROR") {
					t.Errorf("%s logged an error:\n%s", d.name, d.Log())
				}
			}
			t.Logf("relay %s: greetings, update pushes, invocations and mail both ways in %.1f s", relayVersion, time.Since(began).Seconds())
		})
	}
	t.Logf("TestTwoVersions: %.1f s in all", time.Since(start).Seconds())
}

// acknowledgement matches a message carrying the part that acknowledges a
// said message (node/wire: Acknowledgements).
var acknowledgement = regexp.MustCompile(`"name":\s*"delivered"`)
