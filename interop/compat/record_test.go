package compat

import (
	"strings"
	"testing"
)

// TestReleaseRecordMatchesTags holds releases.txt to the git tags where the
// clone has them: every v* tag is recorded with the commit it names, and
// every recorded release whose tag is present names the same commit. A
// clone without tags (CI's may carry the branch only) has nothing to
// compare; the record alone then says what the releases are.
func TestReleaseRecordMatchesTags(t *testing.T) {
	root := repoRoot(t)
	out, err := git(root, "tag", "--list", "v*")
	if err != nil {
		t.Fatalf("listing the tags: %v", err)
	}
	tags := strings.Fields(out)
	if len(tags) == 0 {
		t.Skip("this clone has no v* tags to hold releases.txt to")
	}
	recorded := map[string]string{}
	for _, r := range releaseRecord(t) {
		if prev, dup := recorded[r.tag]; dup {
			t.Errorf("releases.txt records %s twice (%s and %s)", r.tag, prev[:12], r.commit[:12])
		}
		recorded[r.tag] = r.commit
	}
	for _, tag := range tags {
		commit, err := git(root, "rev-list", "-n", "1", "refs/tags/"+tag)
		if err != nil {
			t.Fatalf("reading tag %s: %v", tag, err)
		}
		switch rec, ok := recorded[tag]; {
		case !ok:
			t.Errorf("tag %s (commit %s) is not in interop/compat/releases.txt: add the line %q", tag, commit[:12], tag+" "+commit)
		case rec != commit:
			t.Errorf("releases.txt says %s is commit %s, and the tag names %s", tag, rec[:12], commit[:12])
		}
	}
}
