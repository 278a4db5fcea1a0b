package negotiate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
)

func TestDecideNeverLeaksHidden(t *testing.T) {
	d := load(t, "document.json")
	stranger := conditions.Facts{Peer: "peer-x", AuthLevel: conditions.Signed, Disclosure: "public"}
	_, hidden := d.Decide("diary.read", stranger, nil, 0)
	_, missing := d.Decide("diary.write", stranger, nil, 0)
	if !errors.Is(hidden, ErrUnknownCapability) || !errors.Is(missing, ErrUnknownCapability) {
		t.Fatalf("hidden: %v; missing: %v", hidden, missing)
	}
	if strings.ReplaceAll(hidden.Error(), "diary.read", "X") != strings.ReplaceAll(missing.Error(), "diary.write", "X") {
		t.Fatalf("a hidden capability answers differently from a missing one:\n%v\n%v", hidden, missing)
	}
	// Absent under the active persona: also unknown.
	if _, err := d.Decide("doc.summarize", stranger, nil, 0); !errors.Is(err, ErrUnknownCapability) {
		t.Fatalf("capability of another persona: %v", err)
	}
	// A visible capability says what is unmet.
	_, err := d.Decide("calendar.availability", stranger, nil, 0)
	var nm *conditions.NotMetError
	if !errors.Is(err, conditions.ErrNotMet) || !errors.As(err, &nm) || nm.Unmet[0].Required != "professional" {
		t.Fatalf("unmet conditions: %v", err)
	}
	// Eligible: hidden capabilities are found.
	friend := conditions.Facts{Peer: "peer-b", AuthLevel: conditions.Verified, Disclosure: "close"}
	if c, err := d.Decide("diary.read", friend, nil, 0); err != nil || c.Name != "diary.read" {
		t.Fatalf("eligible friend: %v", err)
	}
	// Busy.
	researcher := conditions.Facts{Peer: "p", AuthLevel: conditions.Signed, Disclosure: "public", Persona: "researcher", Temperature: "warm", InFlight: 2}
	_, err = d.Decide("doc.summarize", researcher, nil, 3*time.Second)
	if !errors.Is(err, conditions.ErrBusy) || !errors.As(err, &nm) || nm.RetryAfter != 3*time.Second {
		t.Fatalf("busy: %v", err)
	}
}

func TestSchemasCheck(t *testing.T) {
	d := load(t, "document.json")
	s, err := NewSchemas(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckParams("calendar.availability", map[string]any{"days": 7.0}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []any{map[string]any{}, map[string]any{"days": 0.0}, map[string]any{"days": "seven"}, nil} {
		err := s.CheckParams("calendar.availability", bad)
		if !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if err := s.CheckParams("calendar.availability", map[string]any{"days": 40.0}); err == nil || !strings.Contains(err.Error(), "at /days") {
		t.Errorf("days 40: %v, want the failing path named", err)
	}
	if err := s.CheckOutput("doc.summarize", map[string]any{"summary": 3.0}); !errors.Is(err, ErrInvalidOutput) || !strings.Contains(err.Error(), "/summary") {
		t.Errorf("bad output: %v", err)
	}
	if err := s.CheckOutput("doc.summarize", map[string]any{"summary": "ok"}); err != nil {
		t.Errorf("good output: %v", err)
	}
	if err := s.CheckParams("gossip.exchange", map[string]any{"anything": true}); err != nil {
		t.Errorf("no schema: %v", err)
	}
}
