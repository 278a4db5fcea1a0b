package main

import "testing"

func TestPolicyVerb(t *testing.T) {
	home, _ := startDaemon(t, nil)
	h := home.Dir
	wantLines(t, "policy", mustRun(t, h, "policy"), "default tier             public")
	out := mustRun(t, h, "policy", "disclosure", "12D3KooWpeer", "personal", "--persona", "researcher")
	wantLines(t, "set disclosure", out, "researcher  12D3KooWpeer  personal")
	wantLines(t, "set temperature", mustRun(t, h, "policy", "temperature", "12D3KooWpeer", "hot"), "12D3KooWpeer  hot")
	// A tier the daemon does not know is a mistake in the command line:
	// exit 2, as every such mistake (it was 1, issue 29).
	if r := ifaced(t, h, "policy", "disclosure", "12D3KooWpeer", "bestie"); r.code != 2 {
		t.Errorf("unknown tier: exit %d %s", r.code, r.stderr)
	}
	if r := ifaced(t, h, "policy", "frobnicate"); r.code != 2 {
		t.Errorf("bad subcommand: exit %d", r.code)
	}
}
