package store

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// TestRuntimeCapabilitiesWithTheDocument: the run-time changes come back
// after a reopen, and a document the seq rules refuse takes its changes
// with it (one transaction).
func TestRuntimeCapabilitiesWithTheDocument(t *testing.T) {
	s, path := openTemp(t)
	if rc, err := s.Own().RuntimeCapabilities(); err != nil || rc.Added != nil || rc.Removed != nil {
		t.Fatalf("before any: %+v %v", rc, err)
	}
	rc := RuntimeCapabilities{Added: []json.RawMessage{json.RawMessage(`{"name":"a.b","description":"d"}`)}, Removed: []string{"ping"}}
	if err := s.Own().SaveOwnDocumentWith(2, json.RawMessage(`{"seq":2}`), rc); err != nil {
		t.Fatal(err)
	}
	stale := RuntimeCapabilities{Removed: []string{"ping", "echo"}}
	if err := s.Own().SaveOwnDocumentWith(2, json.RawMessage(`{"seq":2}`), stale); !errors.Is(err, ErrStaleSeq) {
		t.Fatalf("a reused seq: %v", err)
	}
	s.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Own().RuntimeCapabilities()
	if err != nil || len(got.Added) != 1 || string(got.Added[0]) != `{"name":"a.b","description":"d"}` || !slices.Equal(got.Removed, []string{"ping"}) {
		t.Fatalf("after a reopen: %+v %v", got, err)
	}
	if seq, _, err := s.Own().OwnDocument(); err != nil || seq != 2 {
		t.Fatalf("the document: %d %v", seq, err)
	}
	// Without a document, only the changes are written.
	if err := s.Own().SaveOwnDocumentWith(0, nil, RuntimeCapabilities{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Own().RuntimeCapabilities(); got.Added != nil || got.Removed != nil {
		t.Fatalf("cleared: %+v", got)
	}
}
