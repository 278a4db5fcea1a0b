package gossip

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip/auditproof"
	"github.com/ifaced/ifaced/identity"
)

// provenLog is a tamper-evident audit log in a fresh directory, signed by
// owner, with a conversation between owner and peer recorded on testNow's
// day (and a refusal), closed.
type provenLog struct {
	dir         string
	owner, peer *identity.Identity
	conv        string
}

func (p *provenLog) trusted(did string) bool { return did == p.owner.DID() }

func (p *provenLog) open(t *testing.T, opts ...AuditOption) *AuditLog {
	t.Helper()
	a, err := OpenAuditLog(p.dir, append([]AuditOption{WithSigner(p.owner), WithClock(func() time.Time { return testNow })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newProvenLog(t *testing.T, messages int) *provenLog {
	t.Helper()
	owner, _ := identity.Generate(nil)
	peer, _ := identity.Generate(nil)
	p := &provenLog{dir: t.TempDir(), owner: owner, peer: peer, conv: auditConvID}
	a := p.open(t)
	p.record(t, a, 1, messages)
	if err := a.RecordRefusal(Refusal{At: testNow, Transport: "libp2p", Peer: "12D3KooWStranger", Code: "bad_signature", Reason: "signature does not verify"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// record records messages from seq on, alternating received (signed by
// peer) and sent (signed by owner).
func (p *provenLog) record(t *testing.T, a *AuditLog, from, count int) {
	t.Helper()
	for i := from; i < from+count; i++ {
		dir, signer, other := Received, p.peer, p.owner
		if i%2 == 0 {
			dir, signer, other = Sent, p.owner, p.peer
		}
		m := auditMessage(t, signer, other, p.conv, int64(i), "")
		if err := a.Record(AuditEntry{At: testNow.Add(time.Duration(i) * time.Millisecond), Direction: dir, Peer: p.peer.PeerID().String(), Transport: "libp2p", Message: m}); err != nil {
			t.Fatal(err)
		}
	}
}

func (p *provenLog) verify(t *testing.T) (*VerifyReport, error) {
	t.Helper()
	return VerifyAuditLog(p.dir, VerifyOptions{Trusted: p.trusted})
}

// peerJSONL is the path of the peer's .jsonl of testNow's day.
func (p *provenLog) peerJSONL() string {
	return filepath.Join(p.dir, testDay, p.peer.PeerID().String()+auditJSONLExt)
}

// wantFailure checks that err is a verification failure whose text holds
// every piece of want.
func wantFailure(t *testing.T, rep *VerifyReport, err error, want ...string) {
	t.Helper()
	var f *VerifyFailure
	if !errors.As(err, &f) || !errors.Is(err, ErrAuditTampered) || rep.Failure != f {
		t.Fatalf("verify: %v (report %+v), want a failure naming %q", err, rep, want)
	}
	for _, w := range want {
		if !strings.Contains(f.Error(), w) {
			t.Errorf("failure %q does not say %q", f.Error(), w)
		}
	}
}

// TestProvenLogVerifies: a log recorded and closed verifies: every
// record matched, the checkpoints signed by the owner's key, the peer's
// signatures on the messages received.
func TestProvenLogVerifies(t *testing.T) {
	p := newProvenLog(t, 6)
	rep, err := p.verify(t)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	// 6 entries, a refusal and the day's open record.
	if rep.Records != 8 || rep.Days != 1 || rep.Checkpoints < 1 || rep.Received != 3 || rep.Pending != 0 || rep.Open {
		t.Errorf("report %+v, want 8 records of 1 day, 3 received verified, at least one checkpoint, nothing pending", rep)
	}
	if len(rep.Signers) != 1 || rep.Signers[0] != p.owner.DID() {
		t.Errorf("signed by %v, want %s", rep.Signers, p.owner.DID())
	}
	// Reopened and written again, it still verifies: the tree goes on.
	a := p.open(t)
	p.record(t, a, 7, 3)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err = p.verify(t); err != nil || rep.Records != 11 {
		t.Fatalf("after a second run: %+v, %v", rep, err)
	}
}

// editFile applies edit to a file's content.
func editFile(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lines splits a .jsonl file's content into its lines, each with its
// newline.
func lines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

// TestTamperingIsNamed: each way of changing a closed log is found, and
// the failure names the file, the line and what happened.
func TestTamperingIsNamed(t *testing.T) {
	stranger, _ := identity.Generate(nil)
	cases := []struct {
		name   string
		tamper func(t *testing.T, p *provenLog)
		want   []string
	}{
		{"bit flipped", func(t *testing.T, p *provenLog) {
			editFile(t, p.peerJSONL(), func(b []byte) []byte {
				l := lines(b)
				i := bytes.Index(l[2], []byte("Message 3"))
				l[2][i+len("Message ")] ^= 0x01 // '3' becomes '2'
				return bytes.Join(l, nil)
			})
		}, []string{"line 3", "changed"}},
		{"record removed", func(t *testing.T, p *provenLog) {
			editFile(t, p.peerJSONL(), func(b []byte) []byte {
				l := lines(b)
				return bytes.Join(append(l[:3:3], l[4:]...), nil)
			})
		}, []string{"line 4", "removed"}},
		{"records reordered", func(t *testing.T, p *provenLog) {
			editFile(t, p.peerJSONL(), func(b []byte) []byte {
				l := lines(b)
				l[1], l[2] = l[2], l[1]
				return bytes.Join(l, nil)
			})
		}, []string{"line 2", "reordered"}},
		{"record inserted", func(t *testing.T, p *provenLog) {
			editFile(t, p.peerJSONL(), func(b []byte) []byte {
				l := lines(b)
				forged := bytes.Replace(l[1], []byte("Message 2"), []byte("Message 9"), 1)
				return bytes.Join(append(l[:1:1], append([][]byte{forged}, l[1:]...)...), nil)
			})
		}, []string{"line 2", "inserted"}},
		{"record appended", func(t *testing.T, p *provenLog) {
			editFile(t, p.peerJSONL(), func(b []byte) []byte {
				l := lines(b)
				return append(b, l[0]...)
			})
		}, []string{peerFilePlaceholder, "in no leaf"}},
		{"file truncated", func(t *testing.T, p *provenLog) {
			editFile(t, p.peerJSONL(), func(b []byte) []byte { return b[:len(b)-40] })
		}, []string{"line 6", "truncated"}},
		{"file deleted", func(t *testing.T, p *provenLog) {
			if err := os.Remove(p.peerJSONL()); err != nil {
				t.Fatal(err)
			}
		}, []string{"line 1", "missing", "no record of pruning"}},
		{"checkpoint re-signed by another key", func(t *testing.T, p *provenLog) {
			path := filepath.Join(p.dir, testDay, auditproof.CheckpointsFile)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			size, root := treeRoot(t, p.dir, testDay)
			note, err := auditproof.Sign(auditproof.Checkpoint{Origin: auditproof.Origin(testDay), Size: size, Root: root, Time: testNow}, stranger)
			if err != nil {
				t.Fatal(err)
			}
			line, _ := encodeLine(string(note))
			if err := os.WriteFile(path, append(raw, line...), 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{auditproof.CheckpointsFile, "line 2", stranger.DID(), "re-signed"}},
		{"tree and records rewritten together", func(t *testing.T, p *provenLog) {
			// A record this daemon sent (no peer signature to break) changed,
			// and the tree rebuilt to match: the signed
			// checkpoint no longer does.
			editFile(t, p.peerJSONL(), func(b []byte) []byte { return bytes.Replace(b, []byte("Message 4"), []byte("Message 8"), 1) })
			rebuildTree(t, p.dir, testDay)
		}, []string{auditproof.CheckpointsFile, "changed after it was signed"}},
		{"day deleted", func(t *testing.T, p *provenLog) {
			// A second day names the first; the first goes.
			a := p.open(t, WithClock(func() time.Time { return testNow.Add(24 * time.Hour) }))
			m := auditMessage(t, p.peer, p.owner, "conv:next", 1, "")
			if err := a.Record(AuditEntry{At: testNow.Add(24 * time.Hour), Direction: Received, Peer: p.peer.PeerID().String(), Transport: "libp2p", Message: m}); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(p.dir, testDay)); err != nil {
				t.Fatal(err)
			}
		}, []string{"2026-03-05/_log.jsonl line 1", "names day " + testDay, "deleted"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProvenLog(t, 6)
			if _, err := p.verify(t); err != nil {
				t.Fatalf("before: %v", err)
			}
			c.tamper(t, p)
			rep, err := p.verify(t)
			want := append([]string(nil), c.want...)
			for i, w := range want {
				if w == peerFilePlaceholder {
					want[i] = p.peer.PeerID().String() + auditJSONLExt
				}
			}
			wantFailure(t, rep, err, want...)
		})
	}
}

// peerFilePlaceholder stands for the peer's file name in a case's wanted
// words.
const peerFilePlaceholder = "\x00peer-file"

// treeRoot is the size and root of a day's tree on disk.
func treeRoot(t *testing.T, dir, day string) (int64, auditproof.Hash) {
	t.Helper()
	r, err := auditproof.OpenReader(filepath.Join(dir, day))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	root, err := r.TreeHash(r.Size())
	if err != nil {
		t.Fatal(err)
	}
	return r.Size(), root
}

// rebuildTree writes a day's tree anew from its records as they are now,
// as someone covering an edit would.
func rebuildTree(t *testing.T, dir, day string) {
	t.Helper()
	r, err := auditproof.OpenReader(filepath.Join(dir, day))
	if err != nil {
		t.Fatal(err)
	}
	var leaves []auditproof.Leaf
	for i := range r.Size() {
		l, err := r.Leaf(i)
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, l)
	}
	names := r.Names()
	r.Close()
	for _, f := range []string{auditproof.HashesFile, auditproof.LeavesFile, auditproof.FilesFile} {
		os.Remove(filepath.Join(dir, day, f))
	}
	tr, err := auditproof.OpenTree(filepath.Join(dir, day), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leaves {
		b, err := os.ReadFile(filepath.Join(dir, day, names[l.File]+auditJSONLExt))
		if err != nil {
			t.Fatal(err)
		}
		rec := b[l.Offset:]
		rec = rec[:bytes.IndexByte(rec, '\n')]
		if _, err := tr.Append(names[l.File], l.Offset, len(rec), auditproof.LeafHash(rec)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPrunedByPolicyIsNotTampering: strangers' files pruned to make room,
// and a day deleted by retention, leave their leaves in the trees and a
// record of what went; the log still verifies, and says which were
// pruned by policy and when.
func TestPrunedByPolicyIsNotTampering(t *testing.T) {
	owner, _ := identity.Generate(nil)
	peer, _ := identity.Generate(nil)
	dir := t.TempDir()
	c := &clock{t: testNow}
	limits := AuditLimits{MaxBytes: 2 << 20, Retention: 30 * 24 * time.Hour}
	a, err := OpenAuditLog(dir, WithSigner(owner), WithClock(c.now), WithLimits(limits))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		if err := a.StrangerRoom(); err != nil {
			t.Fatalf("stranger %d refused: %v", i, err)
		}
		m := auditMessage(t, peer, owner, fmt.Sprintf("conv:s%d", i), 1, "")
		m.Body.Text = strings.Repeat("x", 48<<10)
		m.Security = nil
		if err := m.Sign(peer, testNow); err != nil {
			t.Fatal(err)
		}
		if err := a.Record(AuditEntry{At: testNow, Direction: Received, Peer: fmt.Sprintf("stranger-%d", i), Transport: "https", Message: m, Stranger: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, testDay, "stranger-0"+auditJSONLExt)); err == nil {
		t.Fatal("the oldest stranger's file was not pruned")
	}
	trusted := func(d string) bool { return d == owner.DID() }
	rep, err := VerifyAuditLog(dir, VerifyOptions{Trusted: trusted})
	if err != nil {
		t.Fatalf("verify after strangers' files were pruned: %v", err)
	}
	if rep.Pruned == 0 || len(rep.PrunedNotes) == 0 || !strings.Contains(strings.Join(rep.PrunedNotes, "\n"), "stranger-0.jsonl pruned by policy at 2026-03-04T23:58:12Z") {
		t.Errorf("report %+v does not say the strangers' files were pruned by policy", rep)
	}

	// Forty days on, retention deletes the day, writing it down first.
	c.t = testNow.AddDate(0, 0, 40)
	b, err := OpenAuditLog(dir, WithSigner(owner), WithClock(c.now), WithLimits(limits))
	if err != nil {
		t.Fatal(err)
	}
	m := auditMessage(t, peer, owner, "conv:later", 1, "")
	if err := b.Record(AuditEntry{At: c.t, Direction: Received, Peer: peer.PeerID().String(), Transport: "libp2p", Message: m}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, testDay)); err == nil {
		t.Fatal("retention kept the old day")
	}
	rep, err = VerifyAuditLog(dir, VerifyOptions{Trusted: trusted})
	if err != nil {
		t.Fatalf("verify after retention deleted a day: %v", err)
	}
	if len(rep.PrunedDays) != 1 || !strings.Contains(rep.PrunedDays[0], testDay+" pruned by policy at 2026-04-13T23:58:12Z (retention)") {
		t.Errorf("pruned days %q, want %s pruned by retention", rep.PrunedDays, testDay)
	}
}

// provenCrashChildEnv names the audit directory a child of
// TestProvenLogAfterACrash records into before it kills itself.
const provenCrashChildEnv = "IFACED_TEST_PROVEN_CRASH_DIR"

// TestProvenLogCrashChild records three entries, signs a checkpoint,
// records three more (their leaves only in memory) and kills itself.
// Run alone it does nothing.
func TestProvenLogCrashChild(t *testing.T) {
	arg := os.Getenv(provenCrashChildEnv)
	if arg == "" {
		t.Skip("the child of TestProvenLogAfterACrash")
	}
	dir, policy, _ := strings.Cut(arg, "|")
	p := &provenLog{dir: dir, owner: testIdentity(t, 1), peer: testIdentity(t, 2), conv: auditConvID}
	a := p.open(t, crashPolicy(policy)...)
	p.record(t, a, 1, 3)
	if policy != "early" {
		if err := a.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	p.record(t, a, 4, 3)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// A daemon killed with leaves not yet written: its log verifies as a log
// that did not close (the records past the last checkpoint pending, none
// failing), and once reopened the records are leaves again, the log
// closes and verifies with nothing pending.
//
// Under either sync policy (with SyncEvery, the recovery's own records
// are made durable by the batch, before its first pass), and killed
// before the tree was first written.
func TestProvenLogAfterACrash(t *testing.T) {
	for _, policy := range []string{"fsync", "every", "early"} {
		t.Run(policy, func(t *testing.T) { provenLogAfterACrash(t, policy) })
	}
}

// crashPolicy is the sync option of a crash test's policy.
func crashPolicy(policy string) []AuditOption {
	if policy == "every" {
		return []AuditOption{SyncEvery(time.Hour)}
	}
	return nil
}

func provenLogAfterACrash(t *testing.T, policy string) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestProvenLogCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), provenCrashChildEnv+"="+dir+"|"+policy)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child did not die of SIGKILL: %v\n%s", err, out)
	}
	p := &provenLog{dir: dir, owner: testIdentity(t, 1), peer: testIdentity(t, 2), conv: auditConvID}
	rep, err := p.verify(t)
	checkpointed := int64(4) // the 3 records and the open record
	if policy == "early" {
		checkpointed = 0 // killed before the tree was first written
	}
	if err != nil || !rep.Open || rep.Pending == 0 || rep.Records != checkpointed {
		t.Fatalf("the crashed log: %+v, %v; want it open, %d records checkpointed, the rest pending", rep, err, checkpointed)
	}
	a := p.open(t, crashPolicy(policy)...)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err = p.verify(t)
	recovered := int64(3)
	if policy == "early" {
		recovered = 6 // all six entries (the open record is leaf 0 again as the tree opens)
	}
	if err != nil || rep.Open || rep.Pending != 0 || rep.Records != 8 || rep.Recovered != recovered {
		t.Fatalf("reopened and closed: %+v, %v; want the 6 entries, the open and recovered records verified, 3 recovered", rep, err)
	}
}

// largeLogChildEnv tells a child of TestVerifyLargeLogInBoundedMemory
// what to do: "verify DIR DID" (verify the audit log in DIR, trusting
// DID's checkpoints) or "hold DIR" (read every record file of DIR into
// memory and keep it, as a verifier that is not streaming would).
const largeLogChildEnv = "IFACED_TEST_LARGE_LOG"

// longAuditEnv set to "1" makes TestVerifyLargeLogInBoundedMemory write
// its long form: 100,000 records (274 MiB) instead of 2,000 (129 MiB).
const longAuditEnv = "IFACED_LONG_AUDIT"

// largeLogBound is the peak resident set a verifying process may reach.
const largeLogBound = 64 << 20

// TestVerifyLargeLogChild does what its parent asks (largeLogChildEnv)
// and prints what it found. Run alone it does nothing.
func TestVerifyLargeLogChild(t *testing.T) {
	arg := os.Getenv(largeLogChildEnv)
	if arg == "" {
		t.Skip("the child of TestVerifyLargeLogInBoundedMemory")
	}
	mode, rest, _ := strings.Cut(arg, " ")
	switch mode {
	case "verify":
		dir, did, _ := strings.Cut(rest, " ")
		rep, err := VerifyAuditLog(dir, VerifyOptions{Trusted: func(d string) bool { return d == did }})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("RECORDS %d RECEIVED %d\n", rep.Records, rep.Received)
	case "hold":
		var held [][]byte
		var n int
		des, err := os.ReadDir(filepath.Join(rest, testDay))
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			if strings.HasSuffix(de.Name(), auditJSONLExt) {
				b, err := os.ReadFile(filepath.Join(rest, testDay, de.Name()))
				if err != nil {
					t.Fatal(err)
				}
				held, n = append(held, b), n+len(b)
			}
		}
		fmt.Printf("HELD %d\n", n)
		runtime.KeepAlive(held)
	default:
		t.Fatalf("%s=%q: want verify DIR DID or hold DIR", largeLogChildEnv, arg)
	}
}

// runLargeLogChild runs TestVerifyLargeLogChild with arg, checks that it
// printed want, and returns its peak resident set (bytes), as the
// operating system counts it.
func runLargeLogChild(t *testing.T, arg, want string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestVerifyLargeLogChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), largeLogChildEnv+"="+arg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child (%s): %v\n%s", arg, err, out)
	}
	if !strings.Contains(string(out), want) {
		t.Fatalf("the child (%s) said %s, want %q", arg, out, want)
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
}

// Verifying a large log streams it: the process that verifies it peaks
// far below the size of the log, as its operating system counts it (the
// child's maximum resident set), below a bound that a process holding the
// log's records in memory exceeds more than twice over (a second child
// shows it, on the same log, every run: the log is large enough to tell
// a streaming verifier from one that is not).
//
// By default the log is 2,000 records of 66 KiB in two peers' files (129
// MiB, a few seconds), so that a verifier holding the whole log, or even
// one peer's file, exceeds the bound; with IFACED_LONG_AUDIT=1 it is
// 100,000 records of 2.8 KiB in twenty files (274 MiB, about a minute on
// two cores), so that what a verifier keeps per record counts too.
func TestVerifyLargeLogInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a log of over 100 MiB")
	}
	records, peers, text := 2_000, 2, 3_000
	if os.Getenv(longAuditEnv) == "1" {
		records, peers, text = 100_000, 20, 50
	}
	owner, peer := testIdentity(t, 1), testIdentity(t, 2)
	dir := t.TempDir()
	a, err := OpenAuditLog(dir, WithSigner(owner), SyncEvery(time.Hour), WithClock(func() time.Time { return testNow }))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*Message
	for i := range 64 {
		m := auditMessage(t, peer, owner, fmt.Sprintf("conv:large-%d", i), int64(i+1), "")
		m.Body.Text = strings.Repeat("a large log's message ", text)
		m.Security = nil
		if err := m.Sign(peer, testNow); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	for i := range records {
		dir := Received
		if i%2 == 1 {
			dir = Sent
		}
		e := AuditEntry{At: testNow, Direction: dir, Peer: peer.PeerID().String(), Transport: "libp2p", Message: msgs[i%len(msgs)]}
		if p := i / 2 % peers; p != 0 {
			e.Peer = fmt.Sprintf("peer-%02d", p) // an HTTP caller's name: checked under the did:key its signature names
		}
		if err := a.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var logBytes, largest int64
	des, _ := os.ReadDir(filepath.Join(dir, testDay))
	for _, de := range des {
		if info, err := de.Info(); err == nil && strings.HasSuffix(de.Name(), auditJSONLExt) {
			logBytes += info.Size()
			largest = max(largest, info.Size())
		}
	}
	if logBytes < 100<<20 {
		t.Fatalf("the log's .jsonl files take %d MiB, want over 100", logBytes>>20)
	}
	maxRSS := runLargeLogChild(t, "verify "+dir+" "+owner.DID(), fmt.Sprintf("RECORDS %d RECEIVED %d", records+1, records/2))
	held := runLargeLogChild(t, "hold "+dir, fmt.Sprintf("HELD %d", logBytes))
	t.Logf("verified %d records (%d MiB of .jsonl, the largest file %d MiB) in a process that peaked at %d MiB; holding them peaks at %d MiB",
		records, logBytes>>20, largest>>20, maxRSS>>20, held>>20)
	if held <= 2*largeLogBound {
		t.Fatalf("a process holding the log's records peaked at %d MiB, not over twice the bound (%d MiB): the log is too small to tell a streaming verifier from one that is not",
			held>>20, largeLogBound>>20)
	}
	if maxRSS > largeLogBound {
		t.Errorf("verifying a log of %d MiB peaked at %d MiB resident, want at most %d MiB", logBytes>>20, maxRSS>>20, largeLogBound>>20)
	}
}
