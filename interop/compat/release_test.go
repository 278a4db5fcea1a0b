package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/semver"
)

// requireCompat: CI sets IFACED_REQUIRE_COMPAT=1, and then a missing
// release commit or git fails the test instead of skipping it.
func requireCompat() bool { return os.Getenv("IFACED_REQUIRE_COMPAT") == "1" }

// skipOrFail skips the test, or fails it when CI requires it to run.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if requireCompat() {
		t.Fatalf(format+" (IFACED_REQUIRE_COMPAT=1: this test must run; .ci/run fetches the history of a shallow clone first)", args...)
	}
	t.Skipf(format, args...)
}

// git runs git in dir and returns its trimmed output.
func git(dir string, args ...string) (string, error) {
	c := exec.Command("git", args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

// repoRoot is the top of the git checkout holding this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		skipOrFail(t, "not in a git checkout: %v", err)
	}
	return root
}

// release is one line of releases.txt: a release's tag and its commit.
type release struct {
	tag    string
	commit string
}

// releaseRecord reads releases.txt, the committed list of releases. A line
// that is not "vX.Y.Z <40 hex digits>" fails the test with its number.
func releaseRecord(t testing.TB) []release {
	t.Helper()
	data, err := os.ReadFile("releases.txt")
	if err != nil {
		t.Fatalf("reading the release record: %v", err)
	}
	var out []release
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !semver.IsValid(f[0]) || semver.Canonical(f[0]) != f[0] || !fullCommit.MatchString(f[1]) {
			t.Fatalf("releases.txt line %d: %q: want a tag vMAJOR.MINOR.PATCH and the full 40-digit commit it names, separated by a space", i+1, line)
		}
		out = append(out, release{tag: f[0], commit: f[1]})
	}
	return out
}

var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// previousRelease is the release to run against: among the releases in
// releases.txt whose commit HEAD contains, the highest by semantic version
// that is not HEAD itself (a checkout of v0.2.0 compares with v0.1.0, not
// with itself). The zero release when there is none: HEAD is the first.
// The record, not the tags, decides, so that a clone without tags runs the
// test the same way; it needs the history (not a shallow clone).
func previousRelease(t testing.TB, root string) release {
	t.Helper()
	head, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		skipOrFail(t, "reading HEAD: %v", err)
	}
	var best release
	for _, r := range releaseRecord(t) {
		if r.commit == head {
			continue
		}
		if _, err := git(root, "merge-base", "--is-ancestor", r.commit, "HEAD"); err != nil {
			if _, missing := git(root, "cat-file", "-e", r.commit+"^{commit}"); missing != nil {
				skipOrFail(t, "release %s's commit %s is not in this clone (a shallow clone: git fetch --unshallow)", r.tag, r.commit[:12])
			}
			continue // a release on another branch, not below HEAD
		}
		if best.tag == "" || semver.Compare(r.tag, best.tag) > 0 {
			best = r
		}
	}
	return best
}

var (
	builds   sync.Map // tag → *built
	headOnce sync.Once
	headBin  string
	headErr  error
)

type built struct {
	once sync.Once
	bin  string // the binary
	src  string // its source tree (a clone at the tag)
	took time.Duration
	err  error
}

// buildDir holds the binaries and clones this test binary builds; TestMain
// removes it.
var buildDir = func() string {
	d, err := os.MkdirTemp("", "ifaced-compat-")
	if err != nil {
		panic(err)
	}
	return d
}()

func TestMain(m *testing.M) {
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// releaseBinary builds ifaced as of a release, once per test binary: in a
// clone of root sharing its objects (git clone --shared: no copy, no
// network), checked out at the release's commit and tagged there, with `go build -buildvcs=true` and
// the shared module and build caches. In a clone (not a worktree, where
// the go command finds no .git directory) the go command stamps the tag as
// the version, which the test checks. The clone is kept in the user's
// cache directory under the tag and its commit, so that the next run
// compiles nothing (the build cache keys on the source's path): the cost
// of the release is one build per machine. It returns the binary and its
// source.
func releaseBinary(t testing.TB, root string, rel release) (bin, src string) {
	t.Helper()
	tag := rel.tag
	v, _ := builds.LoadOrStore(tag, &built{})
	b := v.(*built)
	b.once.Do(func() {
		start := time.Now()
		b.bin = filepath.Join(buildDir, tag, "ifaced")
		b.src, b.err = releaseSource(root, rel)
		if b.err != nil {
			return
		}
		// -trimpath: the build cache then shares every package whose
		// source the release has in common with a tree built before,
		// wherever its clone is.
		c := exec.Command("go", "build", "-trimpath", "-buildvcs=true", "-o", b.bin, "./cmd/ifaced")
		c.Dir = b.src
		if out, err := c.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/ifaced at %s: %v\n%s", tag, err, out)
			return
		}
		b.took = time.Since(start)
		t.Logf("built ifaced %s from its commit in %.1f s (source %s)", tag, b.took.Seconds(), b.src)
	})
	if b.err != nil {
		t.Fatalf("building the release %s: %v", tag, b.err)
	}
	return b.bin, b.src
}

// releaseSource is a clean clone of root at the release's commit, with the
// release's tag made in the clone (so that the go command stamps it as the
// version even when root has no tags), in the user's cache directory (else
// the temporary one), reused while it is intact.
func releaseSource(root string, rel release) (string, error) {
	tag, commit := rel.tag, rel.commit
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	src := filepath.Join(base, "ifaced-compat", tag+"-"+commit[:12])
	if head, err := git(src, "rev-parse", "HEAD"); err == nil && head == commit {
		if st, err := git(src, "status", "--porcelain"); err == nil && st == "" && hasTag(src, tag, commit) {
			return src, nil
		}
	}
	os.RemoveAll(src)
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(src), ".clone-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if _, err := git(root, "clone", "--quiet", "--shared", "--no-checkout", root, filepath.Join(tmp, "src")); err != nil {
		return "", err
	}
	if _, err := git(filepath.Join(tmp, "src"), "checkout", "--quiet", "--detach", commit); err != nil {
		return "", err
	}
	if !hasTag(filepath.Join(tmp, "src"), tag, commit) {
		if _, err := git(filepath.Join(tmp, "src"), "tag", "--force", tag, commit); err != nil {
			return "", err
		}
	}
	if err := os.Rename(filepath.Join(tmp, "src"), src); err != nil {
		if _, err2 := git(src, "rev-parse", "HEAD"); err2 != nil { // not another run's clone either
			return "", err
		}
	}
	return src, nil
}

// hasTag says whether tag names commit in the repository at dir.
func hasTag(dir, tag, commit string) bool {
	c, err := git(dir, "rev-list", "-n", "1", "refs/tags/"+tag)
	return err == nil && c == commit
}

// headBinary builds this tree's ifaced (with its changes, if any), once
// per test binary.
func headBinary(t testing.TB, root string) string {
	t.Helper()
	headOnce.Do(func() {
		headBin = filepath.Join(buildDir, "head", "ifaced")
		c := exec.Command("go", "build", "-o", headBin, "./cmd/ifaced")
		c.Dir = root
		if out, err := c.CombinedOutput(); err != nil {
			headErr = fmt.Errorf("go build ./cmd/ifaced: %v\n%s", err, out)
		}
	})
	if headErr != nil {
		t.Fatal(headErr)
	}
	return headBin
}

// binaryVersion is what `ifaced version --json` says.
func binaryVersion(t testing.TB, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version", "--json").Output()
	var v struct {
		Version string `json:"version"`
	}
	if err != nil || json.Unmarshal(out, &v) != nil {
		t.Fatalf("%s version --json: %v: %s", bin, err, out)
	}
	return v.Version
}
