package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/semver"
)

// requireCompat: CI sets IFACED_REQUIRE_COMPAT=1, and then a missing tag
// or git fails the test instead of skipping it.
func requireCompat() bool { return os.Getenv("IFACED_REQUIRE_COMPAT") == "1" }

// skipOrFail skips the test, or fails it when CI requires it to run.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if requireCompat() {
		t.Fatalf(format+" (IFACED_REQUIRE_COMPAT=1: this test must run; .ci/run fetches the tags first)", args...)
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

// previousRelease is the highest v* tag below this tree's own version:
// among the tags HEAD contains, the highest by semantic version that is
// not on HEAD itself (a checkout of v0.2.0 compares with v0.1.0, not with
// itself). "" when there is none: HEAD is the first release.
func previousRelease(t testing.TB, root string) string {
	t.Helper()
	out, err := git(root, "tag", "--merged", "HEAD", "--list", "v*")
	if err != nil {
		skipOrFail(t, "listing the release tags: %v", err)
	}
	atHead, _ := git(root, "tag", "--points-at", "HEAD", "--list", "v*")
	own := map[string]bool{}
	for _, tag := range strings.Fields(atHead) {
		own[tag] = true
	}
	best := ""
	for _, tag := range strings.Fields(out) {
		if semver.IsValid(tag) && !own[tag] && (best == "" || semver.Compare(tag, best) > 0) {
			best = tag
		}
	}
	if best == "" && len(own) == 0 {
		skipOrFail(t, "no v* release tag in this clone's history (a shallow clone, or the tags were not fetched: git fetch --tags origin)")
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

// releaseBinary builds ifaced as of tag, once per test binary: in a
// clone of root sharing its objects (git clone --shared: no copy, no
// network), checked out at the tag, with `go build -buildvcs=true` and
// the shared module and build caches. In a clone (not a worktree, where
// the go command finds no .git directory) the go command stamps the tag as
// the version, which the test checks. The clone is kept in the user's
// cache directory under the tag and its commit, so that the next run
// compiles nothing (the build cache keys on the source's path): the cost
// of the release is one build per machine. It returns the binary and its
// source.
func releaseBinary(t testing.TB, root, tag string) (bin, src string) {
	t.Helper()
	v, _ := builds.LoadOrStore(tag, &built{})
	b := v.(*built)
	b.once.Do(func() {
		start := time.Now()
		b.bin = filepath.Join(buildDir, tag, "ifaced")
		b.src, b.err = releaseSource(root, tag)
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
		t.Logf("built ifaced %s from its tag in %.1f s (source %s)", tag, b.took.Seconds(), b.src)
	})
	if b.err != nil {
		t.Fatalf("building the release %s: %v", tag, b.err)
	}
	return b.bin, b.src
}

// releaseSource is a clean clone of root at tag, in the user's cache
// directory (else the temporary one), reused while it is intact.
func releaseSource(root, tag string) (string, error) {
	commit, err := git(root, "rev-list", "-n", "1", "refs/tags/"+tag)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	src := filepath.Join(base, "ifaced-compat", tag+"-"+commit[:12])
	if head, err := git(src, "rev-parse", "HEAD"); err == nil && head == commit {
		if st, err := git(src, "status", "--porcelain"); err == nil && st == "" {
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
	if err := os.Rename(filepath.Join(tmp, "src"), src); err != nil {
		if _, err2 := git(src, "rev-parse", "HEAD"); err2 != nil { // not another run's clone either
			return "", err
		}
	}
	return src, nil
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
