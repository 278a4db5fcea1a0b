package gossip

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/oklog/ulid/v2"
)

const auditConvID = "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCE"

// auditMessage is a signed message of conversation conv with the given
// sequence, replying to inReplyTo when it is not empty.
func auditMessage(t *testing.T, from, to *identity.Identity, conv string, seq int64, inReplyTo string) *Message {
	t.Helper()
	m := sampleMessage(from, to)
	m.Headers.ConversationID = conv
	m.Headers.MessageID = fmt.Sprintf("msg:%s-%d", strings.ReplaceAll(conv, ":", ""), seq)
	m.Headers.Sequence = seq
	m.Headers.Thread = nil
	if inReplyTo != "" {
		m.Headers.Thread = &Thread{InReplyTo: inReplyTo}
	}
	m.Body.Text = fmt.Sprintf("Message %d of the conversation.\n", seq)
	if err := m.Sign(from, testNow); err != nil {
		t.Fatal(err)
	}
	return m
}

// auditMarker matches the marker line of one entry in a .md file.
var auditMarker = regexp.MustCompile(`(?m)^<!-- ifaced audit: (sent|received) (\S+) peer (\S+) via (\S+) conversation (\S+)(?: — (.*))? -->\n`)

type mdEntry struct {
	direction, at, peer, transport, conv, note string
	body                                       []byte // what follows the marker, without the blank line
}

// testDay is the audit day directory of testNow.
const testDay = "2026-03-04"

// peerFile is the path of a peer's audit file of a day, by its kept name.
func peerFile(dir, day, peer, ext string) string { return filepath.Join(dir, day, peer+ext) }

// splitAuditMD splits a .md audit file at its marker lines.
func splitAuditMD(t *testing.T, path string) (title string, entries []mdEntry) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	locs := auditMarker.FindAllSubmatchIndex(b, -1)
	if len(locs) == 0 {
		return string(b), nil
	}
	title = string(b[:locs[0][0]])
	for i, l := range locs {
		end := len(b)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		seg := b[l[1]:end]
		if !bytes.HasSuffix(seg, []byte("\n\n")) {
			t.Fatalf("entry %d of %s does not end with a blank line:\n%s", i, path, seg)
		}
		e := mdEntry{body: seg[:len(seg)-1]}
		e.direction, e.at, e.peer, e.transport = string(b[l[2]:l[3]]), string(b[l[4]:l[5]]), string(b[l[6]:l[7]]), string(b[l[8]:l[9]])
		e.conv = string(b[l[10]:l[11]])
		if l[12] >= 0 {
			e.note = string(b[l[12]:l[13]])
		}
		entries = append(entries, e)
	}
	return title, entries
}

func cborOf(t *testing.T, m *Message) []byte {
	t.Helper()
	b, err := EncodeCBOR(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// flushAudit waits for a's .md writer (audit_writer.go) to render what
// was recorded.
func flushAudit(t *testing.T, a *AuditLog) {
	t.Helper()
	if err := a.Flush(); err != nil {
		t.Fatalf("rendering the .md files: %v", err)
	}
}

func openAudit(t *testing.T, dir string) *AuditLog {
	t.Helper()
	a, err := OpenAuditLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestAuditLogConversation(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	bobPeer := bob.PeerID().String()
	dir := filepath.Join(t.TempDir(), "audit")
	a := openAudit(t, dir)

	m1 := auditMessage(t, alice, bob, auditConvID, 1, "")
	m2 := auditMessage(t, bob, alice, auditConvID, 2, m1.Headers.MessageID)
	m3 := auditMessage(t, alice, bob, auditConvID, 3, m2.Headers.MessageID)
	recorded := []AuditEntry{
		{At: testNow, Direction: Sent, Peer: bobPeer, Transport: "libp2p", Message: m1},
		{At: testNow.Add(time.Second), Direction: Received, Peer: bobPeer, Transport: "libp2p", Note: "refused: test -->  note\nwith a break", Message: m2},
		{At: testNow.Add(2 * time.Second), Direction: Sent, Peer: bobPeer, Transport: "libp2p", Message: m3},
	}
	for _, e := range recorded {
		if err := a.Record(e); err != nil {
			t.Fatal(err)
		}
	}

	// Modes.
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("audit directory: %v, mode %v, want 0700", err, st.Mode().Perm())
	}
	flushAudit(t, a)
	md := peerFile(dir, testDay, bobPeer, ".md")
	for _, p := range []string{md, strings.TrimSuffix(md, ".md") + ".jsonl"} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, want mode 0600", p, err)
		}
	}

	// The .md reads as intended and each rendering parses back.
	title, got := splitAuditMD(t, md)
	if !strings.HasPrefix(title, "# Peer "+bobPeer+", "+testDay+"\n") {
		t.Errorf("title:\n%s", title)
	}
	if len(got) != 3 {
		t.Fatalf("%d marker lines in %s, want 3", len(got), md)
	}
	seqToID := map[int64]string{1: m1.Headers.MessageID, 2: m2.Headers.MessageID, 3: m3.Headers.MessageID}
	idOf := func(seq int64) (string, bool) { id, ok := seqToID[seq]; return id, ok }
	signers := []*identity.Identity{alice, bob, alice}
	for i, e := range got {
		want := recorded[i]
		if e.direction != string(want.Direction) || e.at != "2026-03-04T23:58:1"+fmt.Sprint(2+i)+"Z" || e.peer != bobPeer || e.transport != "libp2p" || e.conv != auditConvID {
			t.Errorf("marker %d: %+v", i, e)
		}
		replyTo := []string{"", "reply-to: 1\n", "reply-to: 2\n"}[i]
		if replyTo != "" && !bytes.Contains(e.body, []byte(replyTo)) {
			t.Errorf("entry %d lacks %q:\n%s", i, replyTo, e.body)
		}
		if replyTo == "" && bytes.Contains(e.body, []byte("reply-to:")) {
			t.Errorf("entry %d has a reply-to:\n%s", i, e.body)
		}
		back, err := ParseIFP3(e.body, idOf)
		if err != nil {
			t.Fatalf("entry %d: %v\n%s", i, err, e.body)
		}
		if err := back.Verify(signers[i].PublicKey()); err != nil {
			t.Errorf("entry %d: signature after the .md: %v", i, err)
		}
		if !bytes.Equal(cborOf(t, back), cborOf(t, want.Message)) {
			t.Errorf("entry %d: the .md rendering changed the message", i)
		}
	}
	if got[1].note != "refused: test - ->  note with a break" {
		t.Errorf("note in marker: %q", got[1].note)
	}

	// Entries gives back what was recorded.
	entries, err := a.Entries(auditConvID)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("Entries: %d entries, want 3", len(entries))
	}
	for i, e := range entries {
		want := recorded[i]
		if !e.At.Equal(want.At) || e.At.Location() != time.UTC || e.Direction != want.Direction || e.Peer != want.Peer ||
			e.Transport != want.Transport || e.Note != want.Note {
			t.Errorf("entry %d: %+v, want %+v", i, e, want)
		}
		if !bytes.Equal(cborOf(t, e.Message), cborOf(t, want.Message)) {
			t.Errorf("entry %d: message changed in the .jsonl", i)
		}
		if err := e.Message.Verify(signers[i].PublicKey()); err != nil {
			t.Errorf("entry %d: %v", i, err)
		}
	}

	// After a restart, reply-to numbers come from the .jsonl.
	a.Close()
	if err := a.Record(recorded[0]); !errors.Is(err, ErrAuditLogClosed) {
		t.Errorf("Record after Close: %v", err)
	}
	a = openAudit(t, dir)
	m4 := auditMessage(t, bob, alice, auditConvID, 4, m3.Headers.MessageID)
	if err := a.Record(AuditEntry{At: testNow.Add(3 * time.Second), Direction: Received, Peer: bobPeer, Transport: "relay", Message: m4}); err != nil {
		t.Fatal(err)
	}
	flushAudit(t, a)
	title, got = splitAuditMD(t, md)
	if len(got) != 4 || !bytes.Contains(got[3].body, []byte("reply-to: 3\n")) || got[3].transport != "relay" {
		t.Fatalf("after reopening: %d entries, last:\n%s", len(got), got[len(got)-1].body)
	}
	if strings.Count(title, "# Peer") != 1 {
		t.Errorf("title written again")
	}
	if entries, err := a.Entries(auditConvID); err != nil || len(entries) != 4 {
		t.Errorf("Entries after reopening: %d, %v", len(entries), err)
	}

	// A second conversation, later; Conversations lists the newest first.
	carol := testIdentity(t, 3)
	other := auditMessage(t, carol, alice, "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCF", 1, "")
	later := testNow.Add(time.Hour)
	if err := a.Record(AuditEntry{At: later, Direction: Received, Peer: carol.PeerID().String(), Transport: "https", Message: other}); err != nil {
		t.Fatal(err)
	}
	convs, err := a.Conversations()
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 2 {
		t.Fatalf("Conversations: %+v", convs)
	}
	c0, c1 := convs[0], convs[1]
	if c0.ID != "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCF" || c0.Messages != 1 || !c0.First.Equal(later) || !c0.Last.Equal(later) ||
		len(c0.Peers) != 1 || c0.Peers[0] != carol.PeerID().String() || c0.File != peerFile(dir, "2026-03-05", carol.PeerID().String(), ".md") {
		t.Errorf("newest conversation: %+v", c0)
	}
	if c1.ID != auditConvID || c1.Messages != 4 || !c1.First.Equal(testNow) || !c1.Last.Equal(testNow.Add(3*time.Second)) ||
		len(c1.Peers) != 1 || c1.Peers[0] != bobPeer || c1.File != md {
		t.Errorf("older conversation: %+v", c1)
	}

	if _, err := a.Entries("conv:unknown"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Entries of an unknown conversation: %v", err)
	}
}

func TestAuditLogRefuses(t *testing.T) {
	a := openAudit(t, t.TempDir())
	m, _ := signedSample(t)
	noConv := *m
	noConv.Headers.ConversationID = ""
	for name, e := range map[string]AuditEntry{
		"nil message":          {Direction: Sent, Message: nil},
		"no conversation":      {Direction: Sent, Message: &noConv},
		"no direction":         {Message: m},
		"not a JSON value":     {Direction: Sent, Message: &Message{Headers: Headers{ConversationID: "c"}, Body: Body{Parts: []Part{{Content: make(chan int)}}}}},
		"unknown direction":    {Direction: "forwarded", Message: m},
		"no message, no conv":  {Direction: Received},
		"empty message struct": {Direction: Received, Message: &Message{}},
	} {
		if err := a.Record(e); err == nil {
			t.Errorf("%s: recorded", name)
		}
	}
}

// The daemon records what it refuses too: invalid, unsigned messages, with
// nil Trace and Security, and bodies that try to forge marker lines.
func TestAuditLogRecordsAnything(t *testing.T) {
	dir := t.TempDir()
	a := openAudit(t, dir)
	bare := &Message{Headers: Headers{ConversationID: "conv:bare", Sequence: -1}}
	forged := &Message{IFP: Version, Headers: Headers{ConversationID: "conv:bare", MessageID: "msg:forged", Sequence: 2},
		Body: Body{Text: "hi\n<!-- ifaced audit: sent 2026-01-01T00:00:00Z peer someone via libp2p -->\n---\nifp: 3\n---\nI agree to everything.\n"}}
	for _, m := range []*Message{bare, forged} {
		if err := a.Record(AuditEntry{Direction: Received, Peer: "203.0.113.9:4431", Transport: "https", Note: "refused: invalid message", Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	convs, err := a.Conversations()
	if err != nil || len(convs) != 1 {
		t.Fatalf("Conversations: %+v, %v", convs, err)
	}
	if _, h := auditNames("203.0.113.9:4431"); filepath.Base(convs[0].File) != h+".md" {
		t.Errorf("a peer with a ':' is in %s, want its hashed name %s", convs[0].File, h)
	}
	flushAudit(t, a)
	_, got := splitAuditMD(t, convs[0].File)
	if len(got) != 2 {
		t.Fatalf("%d marker lines, want 2 (a body must not forge one)", len(got))
	}
	if !bytes.Contains(got[1].body, []byte("```json\n")) || !bytes.Contains(got[1].body, []byte("I agree to everything.")) {
		t.Errorf("forging body not shown as JSON:\n%s", got[1].body)
	}
	entries, err := a.Entries("conv:bare")
	if err != nil || len(entries) != 2 || entries[0].Message.Trace != nil || entries[0].Message.Security != nil ||
		entries[1].Message.Body.Text != forged.Body.Text || entries[0].At.IsZero() {
		t.Fatalf("Entries: %+v, %v", entries, err)
	}
}

func TestAuditLogNames(t *testing.T) {
	for peer, want := range map[string]string{
		"12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo": "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo",
		"a1b2c3": "a1b2c3",
		"x.y-z":  "x.y-z",
	} {
		if kept, _ := auditNames(peer); kept != want {
			t.Errorf("%q: named %q, want %q", peer, kept, want)
		}
	}
	_, h := auditNames("a/b")
	for _, peer := range []string{"../../etc/passwd", "a/b", "..", ".hidden", "-rf", "peer_1", "NUL", "com1", "nul.x", "with space",
		"203.0.113.9:4431", "", strings.Repeat("x", 129), h} {
		if kept, _ := auditNames(peer); kept != "" {
			t.Errorf("%q kept as %q, want a hashed name", peer, kept)
		}
	}

	// Hostile peers and hostile conversation IDs, all on one day.
	parent := t.TempDir()
	dir := filepath.Join(parent, "audit")
	a := openAudit(t, dir)
	hostile := []string{"../../etc/passwd", "a/b", "../x", "/abs", strings.Repeat("y", 300), "con:1", "con_1", "CON:1", h, "ok", "a\nb", "2026-03-04",
		"conv:a&b<c>", "q\"uote\\", "line\u2028sep", "é"}
	for i, s := range hostile {
		m := &Message{IFP: Version, Headers: Headers{ConversationID: s, MessageID: fmt.Sprintf("msg:%d", i), Sequence: 1}}
		if err := a.Record(AuditEntry{At: testNow.Add(time.Duration(i) * time.Millisecond), Direction: Received, Peer: s, Transport: "libp2p", Message: m}); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	}
	flushAudit(t, a)
	// Nothing outside the audit directory; in it, the spares and the day;
	// in the day, two regular files per peer.
	if des, _ := os.ReadDir(parent); len(des) != 1 {
		t.Errorf("files next to the audit directory: %v", des)
	}
	top, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range top {
		// The marker of an open log (audit_writer.go) is the one file.
		if de.Name() == renderingMarker && de.Type().IsRegular() {
			continue
		}
		if !de.IsDir() || de.Name() != spareDir && de.Name() != testDay {
			t.Errorf("%s in the audit directory", de.Name())
		}
	}
	des, err := os.ReadDir(filepath.Join(dir, testDay))
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if !de.Type().IsRegular() {
			t.Errorf("%s is not a regular file", de.Name())
		}
	}
	if len(des) != 2*len(hostile) {
		t.Errorf("%d files for %d peers", len(des), len(hostile))
	}
	// Each conversation reads back alone.
	for i, id := range hostile {
		entries, err := a.Entries(id)
		if err != nil || len(entries) != 1 || entries[0].Message.Headers.MessageID != fmt.Sprintf("msg:%d", i) {
			t.Errorf("%q: %v, %+v", id, err, entries)
		}
	}
	convs, err := a.Conversations()
	if err != nil || len(convs) != len(hostile) {
		t.Fatalf("Conversations: %d, %v", len(convs), err)
	}
	for i, c := range convs {
		if want := hostile[len(hostile)-1-i]; c.ID != want || filepath.Dir(c.File) != filepath.Join(dir, testDay) {
			t.Errorf("conversation %d: %q in %s, want %q", i, c.ID, c.File, want)
		}
	}
	// A reopened log finds every peer at the same name.
	b := openAudit(t, dir)
	for i, s := range hostile {
		m := &Message{IFP: Version, Headers: Headers{ConversationID: s, MessageID: fmt.Sprintf("msg:again-%d", i), Sequence: 2}}
		if err := b.Record(AuditEntry{At: testNow.Add(time.Second), Direction: Received, Peer: s, Transport: "libp2p", Message: m}); err != nil {
			t.Fatal(err)
		}
		if entries, err := b.Entries(s); err != nil || len(entries) != 2 {
			t.Errorf("reopened, %q: %d entries, %v", s, len(entries), err)
		}
	}
	if des, _ := os.ReadDir(filepath.Join(dir, testDay)); len(des) != 2*len(hostile) {
		t.Errorf("after reopening: %d files for %d peers", len(des), len(hostile))
	}
}

// Every conversation with a peer on one day shares the peer's two files.
func TestAuditLogConversationsShareTheirPeersFiles(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	bobPeer := bob.PeerID().String()
	dir := t.TempDir()
	a := openAudit(t, dir)
	var ids []string
	for i := range 10 {
		id := fmt.Sprintf("conv:%d", i)
		ids = append(ids, id)
		for seq := int64(1); seq <= 2; seq++ {
			m := auditMessage(t, alice, bob, id, seq, "")
			if err := a.Record(AuditEntry{At: testNow.Add(time.Duration(i) * time.Millisecond), Direction: Sent, Peer: bobPeer, Transport: "libp2p", Message: m}); err != nil {
				t.Fatal(err)
			}
		}
	}
	flushAudit(t, a)
	des, _ := os.ReadDir(filepath.Join(dir, testDay))
	if len(des) != 2 {
		t.Fatalf("%d files for one peer's day, want 2", len(des))
	}
	_, got := splitAuditMD(t, peerFile(dir, testDay, bobPeer, ".md"))
	if len(got) != 20 || got[0].conv != "conv:0" || got[19].conv != "conv:9" {
		t.Fatalf("%d entries in the .md, first of %s, last of %s", len(got), got[0].conv, got[len(got)-1].conv)
	}
	for _, id := range ids {
		entries, err := a.Entries(id)
		if err != nil || len(entries) != 2 || entries[0].Message.Headers.ConversationID != id || entries[1].Message.Headers.Sequence != 2 {
			t.Fatalf("%s: %d entries, %v", id, len(entries), err)
		}
	}
	convs, err := a.Conversations()
	if err != nil || len(convs) != 10 || convs[0].ID != "conv:9" || convs[0].Messages != 2 || convs[0].File != peerFile(dir, testDay, bobPeer, ".md") {
		t.Fatalf("Conversations: %+v, %v", convs, err)
	}
}

// A conversation that goes on past midnight, and across a restart, reads
// back whole; so does one whose ID is not a ULID, or whose ULID lies.
func TestAuditLogConversationAcrossDays(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	dir := t.TempDir()
	a := openAudit(t, dir)
	lying := "conv:" + ulid.MustNew(ulid.Timestamp(testNow.Add(72*time.Hour)), nil).String()
	for _, id := range []string{auditConvID, "plain-id", lying} {
		for seq := int64(1); seq <= 3; seq++ {
			at := testNow.Add(time.Duration(seq) * time.Minute) // 23:59, 00:00, 00:01
			m := auditMessage(t, alice, bob, id, seq, "")
			if err := a.Record(AuditEntry{At: at, Direction: Sent, Peer: "p", Transport: "libp2p", Message: m}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, day := range []string{testDay, "2026-03-05"} {
		if _, err := os.Stat(peerFile(dir, day, "p", ".jsonl")); err != nil {
			t.Fatalf("no file for %s: %v", day, err)
		}
	}
	for _, log := range []*AuditLog{a, openAudit(t, dir)} {
		for _, id := range []string{auditConvID, "plain-id", lying} {
			entries, err := log.Entries(id)
			if err != nil || len(entries) != 3 {
				t.Fatalf("%s: %d entries, %v", id, len(entries), err)
			}
			for i, e := range entries {
				if e.Message.Headers.Sequence != int64(i+1) {
					t.Errorf("%s: entry %d has sequence %d", id, i, e.Message.Headers.Sequence)
				}
			}
		}
	}
	convs, err := a.Conversations()
	if err != nil || len(convs) != 3 {
		t.Fatalf("Conversations: %+v, %v", convs, err)
	}
	for _, c := range convs {
		if c.Messages != 3 || c.File != peerFile(dir, testDay, "p", ".md") || !c.First.Equal(testNow.Add(time.Minute)) {
			t.Errorf("%s: %+v", c.ID, c)
		}
	}
}

// A file that belongs to another peer (as two peer IDs differing in case
// meet on a case-insensitive file system) is left alone.
func TestAuditLogFileOfAnotherPeer(t *testing.T) {
	dir := t.TempDir()
	a := openAudit(t, dir)
	m := &Message{Headers: Headers{ConversationID: "conv:X", MessageID: "msg:1"}}
	if err := a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: "PeerX", Message: m}); err != nil {
		t.Fatal(err)
	}
	flushAudit(t, a)
	// Simulate case folding: the kept name of "PeerY" is made to hold PeerX's files.
	for _, ext := range []string{".md", ".jsonl"} {
		b, _ := os.ReadFile(peerFile(dir, testDay, "PeerX", ext))
		os.WriteFile(peerFile(dir, testDay, "PeerY", ext), b, 0o600)
	}
	b := openAudit(t, dir)
	y := &Message{Headers: Headers{ConversationID: "conv:Y", MessageID: "msg:2"}}
	if err := b.Record(AuditEntry{At: testNow, Direction: Sent, Peer: "PeerY", Message: y}); err != nil {
		t.Fatal(err)
	}
	_, h := auditNames("PeerY")
	if _, err := os.Stat(peerFile(dir, testDay, h, ".jsonl")); err != nil {
		t.Fatalf("PeerY not sent to its hashed name: %v", err)
	}
	if raw, _ := os.ReadFile(peerFile(dir, testDay, "PeerY", ".jsonl")); bytes.Contains(raw, []byte("conv:Y")) {
		t.Fatal("PeerY's entry went into PeerX's file")
	}
	c := openAudit(t, dir)
	if entries, err := c.Entries("conv:Y"); err != nil || len(entries) != 1 || entries[0].Message.Headers.MessageID != "msg:2" {
		t.Fatalf("conv:Y after reopening: %v %+v", err, entries)
	}
}

func TestAuditLogTornLine(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	dir := t.TempDir()
	a := openAudit(t, dir)
	m1 := auditMessage(t, alice, bob, auditConvID, 1, "")
	m2 := auditMessage(t, bob, alice, auditConvID, 2, m1.Headers.MessageID)
	m3 := auditMessage(t, alice, bob, auditConvID, 3, m2.Headers.MessageID)
	for _, m := range []*Message{m1, m2} {
		if err := a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: "p", Transport: "libp2p", Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()

	// A crash in the middle of writing a third entry to both files.
	jsonl := peerFile(dir, testDay, "p", ".jsonl")
	md := peerFile(dir, testDay, "p", ".md")
	full, _ := os.ReadFile(jsonl)
	first := full[:bytes.IndexByte(full, '\n')]
	appendFile(t, jsonl, first[:len(first)/2])
	mdText, _ := os.ReadFile(md)
	appendFile(t, md, mdText[len(mdText)/2:len(mdText)*3/4])

	a = openAudit(t, dir)
	entries, err := a.Entries(auditConvID)
	if !errors.Is(err, ErrTornAuditLine) || !strings.Contains(err.Error(), jsonl) || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("torn last line: %v", err)
	}
	if len(entries) != 2 || entries[1].Message.Headers.MessageID != m2.Headers.MessageID {
		t.Fatalf("entries before the torn line: %+v", entries)
	}

	// The next Record ends the torn lines first.
	if err := a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: "p", Transport: "libp2p", Message: m3}); err != nil {
		t.Fatal(err)
	}
	entries, err = a.Entries(auditConvID)
	if !errors.Is(err, ErrTornAuditLine) || len(entries) != 3 || !bytes.Equal(cborOf(t, entries[2].Message), cborOf(t, m3)) {
		t.Fatalf("after recording past the torn line: %d entries, %v", len(entries), err)
	}
	flushAudit(t, a)
	_, got := splitAuditMD(t, md)
	last := got[len(got)-1]
	back, err := ParseIFP3(last.body, nil)
	if err != nil || !bytes.Contains(last.body, []byte("reply-to: 2\n")) {
		t.Fatalf("the entry after the torn one: %v\n%s", err, last.body)
	}
	if err := back.Verify(alice.PublicKey()); err != nil {
		t.Fatal(err)
	}
	if convs, err := a.Conversations(); err != nil || len(convs) != 1 || convs[0].Messages != 3 {
		t.Fatalf("Conversations with a torn line: %+v, %v", convs, err)
	}

	// Anything else that does not decode is an error naming file and
	// line: for Entries when the line names the conversation, for
	// Conversations always.
	appendFile(t, jsonl, []byte("{\"at\": \"yesterday\"}\n"))
	if _, err := a.Conversations(); err == nil || errors.Is(err, ErrTornAuditLine) || !strings.Contains(err.Error(), jsonl+": line 5") {
		t.Fatalf("bad line, Conversations: %v", err)
	}
	if entries, err := a.Entries(auditConvID); len(entries) != 3 || !errors.Is(err, ErrTornAuditLine) {
		t.Fatalf("a bad line of no conversation stopped Entries: %d, %v", len(entries), err)
	}
	appendFile(t, jsonl, []byte("{\"at\": \"yesterday\", \"conversation_id\": \""+auditConvID+"\"}\n"))
	if _, err := a.Entries(auditConvID); err == nil || errors.Is(err, ErrTornAuditLine) || !strings.Contains(err.Error(), jsonl+": line 6") {
		t.Fatalf("bad line of the conversation: %v", err)
	}
	// ... which does not stop the daemon from recording.
	m4 := auditMessage(t, bob, alice, auditConvID, 4, m3.Headers.MessageID)
	flushAudit(t, a)
	b := openAudit(t, dir)
	if err := b.Record(AuditEntry{At: testNow, Direction: Received, Peer: "p", Transport: "libp2p", Message: m4}); err != nil {
		t.Fatal(err)
	}
	flushAudit(t, b)
	if _, got := splitAuditMD(t, md); !bytes.Contains(got[len(got)-1].body, []byte("reply-to: 3\n")) {
		t.Errorf("reply-to after a bad line:\n%s", got[len(got)-1].body)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func TestAuditLogConcurrent(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	dir := t.TempDir()
	a := openAudit(t, dir)
	msgs := make([]*Message, 8)
	for i := range msgs {
		msgs[i] = auditMessage(t, alice, bob, auditConvID, int64(i+1), "")
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(msgs))
	for _, m := range msgs {
		wg.Go(func() {
			errs <- a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: "p", Transport: "libp2p", Message: m})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := os.ReadFile(peerFile(dir, testDay, "p", ".jsonl"))
	if n := bytes.Count(raw, []byte("\n")); n != 8 {
		t.Errorf("%d lines, want 8", n)
	}
	entries, err := a.Entries(auditConvID)
	if err != nil || len(entries) != 8 {
		t.Fatalf("Entries: %d, %v", len(entries), err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.Message.Headers.MessageID] = true
		if err := e.Message.Verify(alice.PublicKey()); err != nil {
			t.Error(err)
		}
	}
	if len(seen) != 8 {
		t.Errorf("%d distinct messages, want 8", len(seen))
	}
	flushAudit(t, a)
	_, got := splitAuditMD(t, peerFile(dir, testDay, "p", ".md"))
	if len(got) != 8 {
		t.Fatalf("%d entries in the .md, want 8", len(got))
	}
	for i, e := range got {
		if _, err := ParseIFP3(e.body, nil); err != nil {
			t.Errorf("md entry %d: %v", i, err)
		}
	}
}

// spareNames lists the spare files ready in an audit directory.
func spareNames(t *testing.T, dir string) map[string]os.FileInfo {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, spareDir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]os.FileInfo{}
	for _, de := range des {
		if info, err := de.Info(); err == nil {
			out[de.Name()] = info
		}
	}
	return out
}

// waitFor polls cond until it holds; the spare files are made by a
// goroutine the test cannot otherwise wait for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAuditLogNewConversationTakesSpareFiles(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	dir := filepath.Join(t.TempDir(), "audit")
	a := openAudit(t, dir)
	waitFor(t, "spare files", func() bool { return len(spareNames(t, dir)) >= spareTarget })
	before := spareNames(t, dir)

	m := auditMessage(t, alice, bob, auditConvID, 1, "")
	if err := a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: bob.PeerID().String(), Transport: "libp2p", Message: m}); err != nil {
		t.Fatal(err)
	}
	flushAudit(t, a)
	for _, ext := range []string{auditJSONLExt, auditMDExt} {
		path := peerFile(dir, testDay, bob.PeerID().String(), ext)
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 || info.Size() == 0 {
			t.Errorf("%s: mode %v, %d bytes", path, info.Mode().Perm(), info.Size())
		}
		var was string
		for name, spare := range before {
			if os.SameFile(spare, info) {
				was = name
			}
		}
		if was == "" {
			t.Errorf("%s was created rather than taken from the spares", path)
		}
		if _, err := os.Stat(filepath.Join(dir, spareDir, was)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("spare %s still in %s after it was used: %v", was, spareDir, err)
		}
	}
	if entries, err := a.Entries(auditConvID); err != nil || len(entries) != 1 {
		t.Fatalf("Entries: %d, %v", len(entries), err)
	}
	waitFor(t, "the spares to be made again", func() bool { return len(spareNames(t, dir)) >= spareTarget })
}

func TestAuditLogSparesNeverReplaceAFile(t *testing.T) {
	dir := t.TempDir()
	sp, err := openSpareFiles(filepath.Join(dir, spareDir), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	waitFor(t, "spare files", func() bool { return len(spareNames(t, dir)) == 2 })
	target := filepath.Join(dir, "taken.jsonl")
	if err := os.WriteFile(target, []byte("someone's entries\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sp.place(target)
	if b, _ := os.ReadFile(target); string(b) != "someone's entries\n" {
		t.Fatalf("the file at the target changed: %q", b)
	}
	sp.mu.Lock()
	ready := len(sp.ready)
	sp.mu.Unlock()
	if ready != 2 {
		t.Errorf("%d spares ready after a refused placement, want 2 (the spare is kept)", ready)
	}
}

func TestAuditLogLeavesNonEmptySparesAlone(t *testing.T) {
	dir := t.TempDir()
	spares := filepath.Join(dir, spareDir)
	os.MkdirAll(spares, 0o700)
	odd := filepath.Join(spares, "spare-1")
	if err := os.WriteFile(odd, []byte("not empty"), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := openSpareFiles(spares, 3)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "spare files", func() bool { return len(spareNames(t, dir)) == 4 })
	sp.close()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if slices.Contains(sp.ready, odd) {
		t.Fatal("a spare with content was made ready")
	}
	if b, _ := os.ReadFile(odd); string(b) != "not empty" {
		t.Fatalf("the odd spare changed: %q", b)
	}
}

func TestAuditLogSyncEvery(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	dir := filepath.Join(t.TempDir(), "audit")
	a, err := OpenAuditLog(dir, SyncEvery(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	m := auditMessage(t, alice, bob, auditConvID, 1, "")
	if err := a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: bob.PeerID().String(), Transport: "libp2p", Message: m}); err != nil {
		t.Fatal(err)
	}
	// Written before Record returned, though not yet synced.
	if entries, err := a.Entries(auditConvID); err != nil || len(entries) != 1 {
		t.Fatalf("Entries before any sync: %d, %v", len(entries), err)
	}
	a.dirtyMu.Lock()
	dirty, dirs := len(a.dirty), len(a.dirtyDirs)
	a.dirtyMu.Unlock()
	if dirty != 1 || dirs != 2 {
		t.Fatalf("after one Record: %d files and %d directories awaiting fsync, want 1 and 2 (the log's and the day's)", dirty, dirs)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	a.dirtyMu.Lock()
	dirty, dirs = len(a.dirty), len(a.dirtyDirs)
	a.dirtyMu.Unlock()
	if dirty != 0 || dirs != 0 {
		t.Fatalf("after Sync: %d files and %d directories awaiting fsync", dirty, dirs)
	}
	// A file removed behind the log's back is reported once, not retried forever.
	m2 := auditMessage(t, alice, bob, "conv:gone", 1, "")
	if err := a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: "gone", Transport: "libp2p", Message: m2}); err != nil {
		t.Fatal(err)
	}
	os.Remove(peerFile(dir, testDay, "gone", ".jsonl"))
	if err := a.Sync(); err == nil || !strings.Contains(err.Error(), "gone.jsonl") {
		t.Fatalf("Sync with a removed file: %v", err)
	}
	if err := a.Sync(); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: "p", Transport: "libp2p", Message: m}); !errors.Is(err, ErrAuditLogClosed) {
		t.Fatalf("Record after Close: %v", err)
	}
}

// A crash between linking a spare into place and removing the spare's name
// leaves one empty file under two names: at the next open the spare's name
// goes, and the peer's file stays, its own.
func TestAuditLogSpareLinkedBeforeACrashIsNotReused(t *testing.T) {
	dir := t.TempDir()
	spares := filepath.Join(dir, spareDir)
	os.MkdirAll(spares, 0o700)
	spare := filepath.Join(spares, "spare-7")
	if err := os.WriteFile(spare, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	peerFile := filepath.Join(dir, "peer.jsonl")
	if err := os.Link(spare, peerFile); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	sp, err := openSpareFiles(spares, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	sp.mu.Lock()
	reused := slices.Contains(sp.ready, spare)
	sp.mu.Unlock()
	if reused {
		t.Fatal("a spare still linked elsewhere was made ready")
	}
	if _, err := os.Stat(spare); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the spare's second name is still there: %v", err)
	}
	if info, err := os.Stat(peerFile); err != nil || links(info) != 1 {
		t.Fatalf("the peer's file: %v", err)
	}
}
