package main

import (
	"errors"
	"slices"
	"testing"

	"github.com/ifaced/ifaced/negotiate"
)

// TestProvideRefusesInvalidNames: a "provide" request with a name that is
// not a capability name changes nothing.
func TestProvideRefusesInvalidNames(t *testing.T) {
	p := &provided{}
	if err := p.set([]string{"lab.b", "lab.a"}); err != nil {
		t.Fatal(err)
	}
	if err := p.set([]string{"ok.name", "Not OK"}); !errors.Is(err, negotiate.ErrInvalidName) {
		t.Errorf("set with an invalid name: %v, want negotiate.ErrInvalidName", err)
	}
	if got, _ := p.get(); !slices.Equal(got, []string{"lab.a", "lab.b"}) {
		t.Errorf("names after a refused set: %v, want [lab.a lab.b]", got)
	}
}
