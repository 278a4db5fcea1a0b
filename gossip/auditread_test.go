package gossip

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestReadAuditLog: a log read by ReadAuditLog (a stopped daemon's, as
// `ifaced audit` reads it) answers Entries, Conversations and Decided as
// the daemon's own log does, and changes nothing in the directory: no
// file created, written or removed, and Record refused.
func TestReadAuditLog(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	dir := t.TempDir()
	a := openAudit(t, dir)
	req := auditMessage(t, bob, alice, auditConvID, 1, "")
	ans := auditMessage(t, alice, bob, auditConvID, 2, req.Headers.MessageID)
	answered := &Decision{Capability: "echo", Outcome: DecisionAnswered, Facts: DecisionFacts{Level: 1, LevelHow: "signed only", Tier: "public", Temperature: "cool", Persona: "default"}}
	for _, e := range []AuditEntry{
		{At: testNow, Direction: Received, Peer: "p", Transport: "libp2p", Message: req},
		{At: testNow.Add(time.Second), Direction: Sent, Peer: "p", Transport: "libp2p", Message: ans, Decision: answered},
	} {
		if err := a.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	wantEntries, err := a.Entries(auditConvID)
	if err != nil {
		t.Fatal(err)
	}
	wantList, err := a.Conversations()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)

	r, err := ReadAuditLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Entries(auditConvID); err != nil || !reflect.DeepEqual(got, wantEntries) {
		t.Errorf("Entries: %v\n got %+v\nwant %+v", err, got, wantEntries)
	}
	if got, err := r.Conversations(); err != nil || !reflect.DeepEqual(got, wantList) {
		t.Errorf("Conversations: %v\n got %+v\nwant %+v", err, got, wantList)
	}
	if e, err := r.Decided(req.Headers.MessageID); err != nil || !reflect.DeepEqual(e.Decision, answered) {
		t.Errorf("Decided: %v %+v", err, e)
	}
	if err := r.Record(AuditEntry{At: testNow, Direction: Received, Peer: "p", Message: req}); !errors.Is(err, ErrAuditLogClosed) {
		t.Errorf("Record on a log opened to read: %v, want ErrAuditLogClosed", err)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("reading changed the directory:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := ReadAuditLog(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v", err)
	}
}

// snapshot is every file under dir with its size and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = fmt.Sprint(info.ModTime(), info.Mode(), info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
