package store

import (
	"path/filepath"
	"reflect"
	"testing"
)

func TestPolicyOverridesPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := s.PolicyOverrides(); err != nil || len(o.Disclosure) != 0 || len(o.MaxTemperature) != 0 {
		t.Fatalf("empty store: %+v %v", o, err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SetDisclosure("default", "peerA", "personal"))
	must(s.SetDisclosure("researcher", "peerA", "professional-open"))
	must(s.SetDisclosure("default", "peerB", "close"))
	must(s.SetDisclosure("default", "peerB", "")) // removed
	must(s.SetMaxTemperature("peerA", "hot"))
	if err := s.SetDisclosure("", "x", "public"); err == nil {
		t.Error("empty persona accepted")
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o, err := s.PolicyOverrides()
	if err != nil {
		t.Fatal(err)
	}
	want := PolicyOverrides{
		Disclosure:     map[string]map[string]string{"default": {"peerA": "personal"}, "researcher": {"peerA": "professional-open"}},
		MaxTemperature: map[string]string{"peerA": "hot"},
	}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("after reopen: %+v", o)
	}
}
