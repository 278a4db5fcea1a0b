package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// auditLine is one line of the demo's audit listing: time, direction,
// peer, phase, sequence.
var auditLine = regexp.MustCompile(`^  \d\d:\d\d:\d\d (sent|received) +(alice|bob|carol) [a-z_]+ \d+: `)

const auditHeading = "== The conversation as Alice's audit log has it (ifaced audit --conversation "

func TestDemoTellsTheStory(t *testing.T) {
	// The temporary data directories go under a directory of the test's,
	// so the test can tell that the output never names them and that they
	// are gone afterwards.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out bytes.Buffer
	if err := Run(context.Background(), &out, Options{}); err != nil {
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
		"received bob close 11: Closing this exchange.",
		"sent     bob context 4: (acknowledges the message above: admitted and recorded)",
		"Alice's agent got (sequence 3",
		// the words a newcomer meets, explained where they first appear
		"(seq: the version of a capability document",
		"sequence 3, the message's place in the conversation",
		"(USDC: a US-dollar stablecoin",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the demo does not say %q", want)
		}
	}
	if strings.Contains(s, "diary.read  ") || strings.Contains(s, "Read Alice's diary") {
		t.Error("the hidden capability appears in a view")
	}
	if strings.Contains(s, tmp) || strings.Contains(s, "ifaced-demo-") {
		t.Errorf("the demo names its temporary data directory, which it removes before anyone could open it:\n%s", s)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("the temporary data directory is still there: %v %v", left, err)
	}

	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	story, audit, ok := strings.Cut(s, auditHeading)
	if !ok {
		t.Fatalf("the demo does not list the conversation from Alice's audit log:\n%s", s)
	}
	if n := strings.Count(story, "\n"); n >= 100 {
		t.Errorf("the story takes %d lines, want under 100", n)
	}
	var entries int
	for _, l := range strings.Split(audit, "\n")[1:] {
		if l == "" {
			break
		}
		if !auditLine.MatchString(l) {
			t.Errorf("not one audited message per line: %q", l)
		}
		entries++
	}
	if entries < 10 {
		t.Errorf("the audit listing has %d lines, want one per message of the conversation (at least 10)", entries)
	}
	if strings.Contains(audit, "signature") || strings.Contains(audit, "ifp: 3") {
		t.Error("the audit listing prints the IFP-3 rendering (it belongs in the files)")
	}
	if last := lines[len(lines)-1]; last != nextStep {
		t.Errorf("the last line is %q, want the next step %q", last, nextStep)
	}
	bobGreets, carolGreets := strings.Index(s, "== Bob greets Alice"), strings.Index(s, "== Carol greets Alice")
	if at := strings.Index(s, "Alice's view of Bob"); at < bobGreets || at > carolGreets {
		t.Error(`"Alice's view of Bob" is not under Bob's greeting`)
	}
	if testing.Verbose() {
		t.Log(s)
	}
}

// With --keep the data directory is named, is there afterwards, and holds
// every message the listing shows.
func TestDemoKeep(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := Run(context.Background(), &out, Options{Dir: dir}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	if !strings.Contains(s, "data kept in "+dir) {
		t.Errorf("the demo does not name the directory it kept:\n%s", s)
	}
	_, audit, ok := strings.Cut(s, auditHeading)
	if !ok {
		t.Fatalf("no audit listing:\n%s", s)
	}
	convID, _, _ := strings.Cut(audit, ")")
	var listed int
	for _, l := range strings.Split(audit, "\n")[1:] {
		if l == "" {
			break
		}
		listed++
	}
	files, _ := filepath.Glob(filepath.Join(dir, "alice", "audit", "*", "*.jsonl"))
	var recorded int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		recorded += bytes.Count(b, []byte(`"conversation_id":"`+convID+`"`))
	}
	if recorded == 0 || listed != recorded {
		t.Errorf("the listing has %d lines for %s; Alice's audit files hold %d messages of it", listed, convID, recorded)
	}
	if want := filepath.Join(dir, "alice", "audit"); !strings.Contains(s, want) {
		t.Errorf("the demo does not say where the full audit log is (%s)", want)
	}
}
