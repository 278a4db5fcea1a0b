// Package compat holds the tests that hold ifaced to its own past: a data
// directory made by the previous release (testdata/home-v0.1.0, a fixture
// made as its README says) opened by this one, and the previous release's
// binary, built from its git tag, run against this one's as real processes
// on loopback (greetings both ways, invocations, update pushes, mail left at
// a relay's mailbox and fetched). "The previous release" is the highest v*
// tag below this tree's own version (previousRelease). Without the tags
// (a shallow clone) the two-version test skips, unless
// IFACED_REQUIRE_COMPAT=1 (CI) makes that a failure; docs/upgrading.md
// says what a user sees across versions.
package compat
