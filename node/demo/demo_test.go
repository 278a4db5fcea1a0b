package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestDemoTellsTheStory(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), &out, Options{Dir: t.TempDir()}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"Alice grants Bob: disclosure \"professional\" (lowered)",
		"Alice grants Carol: disclosure \"public\" (granted)",
		"no   calendar.availability",
		"needs min_disclosure professional, has public",
		"needs min_auth_level 2 (verified), has 1 (signed)",
		"refused (conditions_not_met)",
		"ifaced trust ",
		"\"windows\": [",
		"\"word_count\": 8",
		"Bob's cached view of Alice, now (seq 2)",
		"needs temperature hot, has warm",
		"travel.plans",
		"phase: close",
		"Alice's agent got (sequence 3)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the demo does not say %q", want)
		}
	}
	if strings.Contains(s, "diary.read  ") || strings.Contains(s, "Read Alice's diary") {
		t.Error("the hidden capability appears in a view")
	}
	if testing.Verbose() {
		t.Log(s)
	}
}
