// Package compat holds the tests that hold ifaced to its own past: a data
// directory made by the previous release (testdata/home-v0.1.0, a fixture
// made as its README says) opened by this one, and the previous release's
// binary, built from its commit, run against this one's as real processes
// on loopback (greetings both ways, invocations, update pushes, mail left at
// a relay's mailbox and fetched). "The previous release" is the highest
// release in releases.txt (each release's tag and commit, committed with
// the release, so that a clone without tags has them) whose commit is below
// HEAD (previousRelease). The fixture test
// runs in `go test ./...`; the two-version test, which builds a release
// and runs five daemons (minutes on a busy machine), runs when asked:
// IFACED_COMPAT=1, or IFACED_REQUIRE_COMPAT=1 as in CI, where a missing
// release commit (a shallow clone) is then a failure rather than a skip.
// docs/upgrading.md says what a user sees across versions.
package compat
