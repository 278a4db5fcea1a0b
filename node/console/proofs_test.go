package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"html"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
)

// TestAuditEvidence: the conversation's page shows it verified in the
// tamper-evident log, with the checkpoint it is included in, and offers
// its evidence bundle: the file `ifaced audit export --conversation`
// writes, which verifies with nothing but the daemon's did:key. The why
// page shows the decision's inclusion: its record's leaf (the leaf the
// bundle proves), the day's tree and the covering checkpoint. Once a
// byte of the conversation's records is changed on disk, the page shows
// it failed, and offers no bundle.
func TestAuditEvidence(t *testing.T) {
	ctx := testContext(t)
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	aliceDID := p.alice.n.ID().DID()
	trusted := func(d string) bool { return d == aliceDID }

	st, body := b.get("/ui/audit/c/" + url.PathEscape(p.conv))
	want(t, "the conversation", st, body, http.StatusOK, `id="proof-state"`, `<b class="badge">Verified</b>`, "signed with its key", `id="bundle-link"`)
	if !regexp.MustCompile(`<p class="proof verified" id="proof-state">`).MatchString(body) {
		t.Errorf("the conversation's state is not marked verified:\n%s", pageText(body))
	}
	ps, err := p.alice.c.AuditProof(ctx, gossip.BundleSelect{ConversationID: p.conv})
	if err != nil || ps.State != gossip.ProofVerified {
		t.Fatalf("the daemon's proof of the conversation: %+v, %v", ps, err)
	}
	want(t, "the conversation's evidence", st, body, http.StatusOK, "Each of its "+strconv.Itoa(ps.Records)+" records")
	for _, cp := range ps.Checkpoints {
		want(t, "the conversation's checkpoints", st, body, http.StatusOK, cp.Origin+"</code>: a tree of "+strconv.FormatInt(cp.Size, 10)+" records", cp.Signer, cp.Root)
	}

	// The bundle, as the browser downloads it from the page's link.
	m := regexp.MustCompile(`<a id="bundle-link" href="([^"]+)" download>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no download link for the bundle:\n%s", pageText(body))
	}
	req, _ := http.NewRequest(http.MethodGet, p.alice.base+html.UnescapeString(m[1]), nil)
	resp, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	file.ReadFrom(resp.Body)
	resp.Body.Close()
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || err != nil ||
		!regexp.MustCompile(`^ifaced-audit-bundle-[A-Za-z0-9._-]+\.json$`).MatchString(params["filename"]) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the bundle's download: %d %v (%v)\n%s", resp.StatusCode, resp.Header, err, file.Bytes())
	}
	rep, err := gossip.VerifyBundle(file.Bytes(), trusted)
	if err != nil || rep.ConversationID != p.conv || len(rep.Records) != ps.Records {
		t.Fatalf("the downloaded bundle, verified with alice's did:key alone: %+v, %v; want the conversation's %d records", rep, err, ps.Records)
	}
	// The same file `ifaced audit export --conversation` writes from the
	// home (nothing was recorded since, so the same checkpoint covers it).
	exported, err := gossip.ExportBundle(filepath.Join(p.alice.home.Dir, "audit"), gossip.BundleSelect{ConversationID: p.conv}, trusted)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := exported.File()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file.Bytes(), cli) {
		t.Errorf("the console's bundle differs from the one the command line writes:\n%s\n---\n%s", file.Bytes(), cli)
	}
	st, body = b.get("/ui/audit/c/conv:nope/bundle")
	want(t, "the bundle of an unknown conversation", st, body, http.StatusNotFound, "conv:nope")

	// Why: the decision's record, at the leaf the bundle proves.
	var leaf int64 = -1
	var bundle gossip.Bundle
	if err := json.Unmarshal(file.Bytes(), &bundle); err != nil {
		t.Fatal(err)
	}
	for _, r := range bundle.Records {
		if strings.Contains(r.Record, `"message_id":"`+p.refusal+`"`) {
			leaf = r.Leaf
		}
	}
	if leaf < 0 {
		t.Fatalf("the bundle holds no record of the refusal %s", p.refusal)
	}
	one, err := p.alice.c.AuditProof(ctx, gossip.BundleSelect{MessageID: p.refusal})
	if err != nil || one.State != gossip.ProofVerified || len(one.Checkpoints) != 1 {
		t.Fatalf("the refusal's proof: %+v, %v", one, err)
	}
	cp := one.Checkpoints[0]
	st, body = b.get("/ui/audit/why/" + url.PathEscape(p.refusal) + "?conversation=" + url.QueryEscape(p.conv))
	want(t, "the refusal's why", st, body, http.StatusOK, `id="inclusion-state"`, `<b class="badge">Verified</b>`,
		`<dd id="inclusion-leaf">`+strconv.FormatInt(leaf, 10)+`</dd>`, "<code>"+cp.Origin+"</code>", "Its record is included in a checkpoint",
		cp.Origin+"</code>: a tree of "+strconv.FormatInt(cp.Size, 10)+" records", cp.Signer, cp.Root)
	if !strings.HasPrefix(cp.Origin, "ifaced-audit/") || cp.Signer != aliceDID || leaf >= cp.Size {
		t.Errorf("the covering checkpoint %+v of leaf %d: want alice's, of the day's tree, covering the leaf", cp, leaf)
	}

	// A byte of a record of the conversation changed on disk: the page
	// says the conversation's records do not verify, and offers no bundle.
	tamperRecord(t, filepath.Join(p.alice.home.Dir, "audit"), p.conv)
	st, body = b.get("/ui/audit/c/" + url.PathEscape(p.conv))
	want(t, "the conversation after a record was changed", st, body, http.StatusOK, `<b class="badge">Failed</b>`, "ifaced audit verify", "The daemon says")
	if strings.Contains(body, `id="bundle-link"`) {
		t.Error("the page of a conversation that does not verify offers its bundle")
	}
}

// tamperRecord changes one byte of a record of conversation conv in the
// audit log under dir (its transport's name), in place: the line still
// parses, and names the same conversation and message.
func tamperRecord(t *testing.T, dir, conv string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*", "*.jsonl"))
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(b); {
			end := bytes.IndexByte(b[off:], '\n')
			if end < 0 {
				break
			}
			line := b[off : off+end]
			if bytes.Contains(line, []byte(`"conversation_id":"`+conv+`"`)) {
				if i := bytes.Index(line, []byte(`"transport":"libp2p"`)); i >= 0 {
					at := int64(off + i + len(`"transport":"libp2`))
					fd, err := os.OpenFile(path, os.O_RDWR, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer fd.Close()
					if _, err := fd.WriteAt([]byte{'q'}, at); err != nil {
						t.Fatal(err)
					}
					return
				}
			}
			off += end + 1
		}
	}
	t.Fatalf("no record of %s over libp2p under %s", conv, dir)
}

// The states a page shows, each with what it means: pending until the
// next checkpoint, untracked, failed (the daemon's words quoted, bounded),
// and unknown when the daemon could not say; only a verified state
// offers the bundle.
func TestProofStatesShown(t *testing.T) {
	rd, err := newRenderer()
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat(`<script>"x"</script>`, 200)
	leaf := int64(7)
	for _, tc := range []struct {
		st      *gossip.ProofState
		err     error
		label   string
		says    string
		verbose bool // the daemon's words shown
	}{
		{st: &gossip.ProofState{State: gossip.ProofPending, Detail: "recorded after the newest checkpoint"}, label: "Pending",
			says: "pending until the next one, which the daemon signs within " + gossip.CheckpointEvery.String(), verbose: true},
		{st: &gossip.ProofState{State: gossip.ProofUntracked, Detail: "no tamper-evident log holds it"}, label: "Untracked",
			says: "nothing proves these records", verbose: true},
		{st: &gossip.ProofState{State: gossip.ProofFailed, Detail: long}, label: "Failed", says: "ifaced audit verify", verbose: true},
		{err: errors.New(long), label: "Unknown", says: "could not say", verbose: true},
		{st: &gossip.ProofState{State: "made-up"}, label: "Unknown", says: "does not know"},
		{st: &gossip.ProofState{State: gossip.ProofVerified, Records: 1, Leaf: &leaf, Origin: "ifaced-audit/2026-03-04",
			Checkpoints: []gossip.BundleCheckpoint{{Origin: "ifaced-audit/2026-03-04", Size: 9, Root: "cm9vdA==", Time: time.Unix(0, 0), Signer: "did:key:z6Mk"}}},
			label: "Verified", says: "ifaced-audit/2026-03-04</code>: a tree of 9 records"},
	} {
		for _, page := range []string{"conversation", "why"} {
			v := newProofView(tc.st, tc.err)
			var d any
			if page == "why" {
				v.ID = "inclusion"
				d = whyData{MessageID: "msg:x", Decision: &decision{Capability: "ping", Outcome: "answered"}, Inclusion: v}
			} else {
				v.ID = "proof"
				d = conversationData{ID: "conv:x", Proof: v}
			}
			w := httptest.NewRecorder()
			rd.render(w, http.StatusOK, page, &pageData{Title: "t", D: d})
			body := w.Body.String()
			want(t, page+" "+tc.label, w.Code, body, http.StatusOK, `id="`+v.ID+`-state"`, `<b class="badge">`+tc.label+`</b>`, tc.says)
			if strings.Contains(body, "<script>\"x\"") || strings.Count(body, "&lt;script&gt;") > maxProofDetail/len(`<script>"x"</script>`)+1 {
				t.Errorf("%s %s: the daemon's words are not escaped and bounded:\n%s", page, tc.label, body)
			}
			if shown := strings.Contains(body, "The daemon says"); shown != tc.verbose {
				t.Errorf("%s %s: the daemon's words shown %v, want %v", page, tc.label, shown, tc.verbose)
			}
			if leafShown := strings.Contains(body, `<dd id="inclusion-leaf">7</dd>`); leafShown != (page == "why" && tc.label == "Verified") {
				t.Errorf("%s %s: the leaf shown %v", page, tc.label, leafShown)
			}
			if offered := strings.Contains(body, `id="bundle-link"`); offered != (page == "conversation" && tc.label == "Verified") {
				t.Errorf("%s %s: the bundle offered %v", page, tc.label, offered)
			}
		}
	}
}

// A bundle's file name takes only safe characters of the conversation's
// ID, which a peer may have chosen.
func TestBundleFileName(t *testing.T) {
	day := time.Date(2026, 3, 4, 23, 0, 0, 0, time.UTC)
	for id, want := range map[string]string{
		"conv:01JABC":                         "ifaced-audit-bundle-conv-01JABC-2026-03-04.json",
		"a\"b\r\nContent-Type: text/html/../": "ifaced-audit-bundle-a-b--Content-Type--text-html-2026-03-04.json",
		strings.Repeat("x", 500):              "ifaced-audit-bundle-" + strings.Repeat("x", 80) + "-2026-03-04.json",
	} {
		if got := bundleFileName(id, day); got != want {
			t.Errorf("bundleFileName(%q) = %q, want %q", id, got, want)
		}
	}
}
