// Package console tests the owner's console (node/console) in a real
// browser: three `ifaced run` daemons, built from cmd/ifaced, greet alice;
// `ifaced ui --no-open` prints alice's login URL, and `ifaced ui` with a
// recording xdg-open on PATH hands it a login page's path; and console.mjs
// drives Debian's Chromium through playwright-core (package.json and its
// lock file here, installed with npm ci by interop/jsdeps) through the
// owner's scenarios: log in with the URL, and from the login page file
// (whose SameSite=Strict session must reach the overview although the
// navigation began at a file), see the peer and its view, raise its tier
// and see what it holds (the view of its greeting) beside what it would
// get, with the form showing the grant; pin its key, mint and revoke an
// introduction (confirmed on a page of its own), revoke carol (confirmed)
// and see her refused on every page, have her greet again and follow the
// refused event to its record, find key_revoked by the audit's search and
// its refusals filter, open the conversation's audit (verified in the
// tamper-evident log; its evidence bundle downloaded, and verified by the
// test with alice's did:key alone) and its why (the decision's record at
// the leaf the bundle proves), watch an event arrive, ask "seen as" for
// an unknown peer (its refusal only) and by keyboard alone (a few Tab
// presses through the skip links), and be refused without a session and
// with a forged CSRF token. Then every page
// is opened at 1100 px and at 375 px: a screenshot of each, no element
// wider than the phone's screen, and axe-core (pinned in the lock file,
// loaded into each page by the script through the DevTools protocol, never
// by the console) reporting no violation at any impact. The test then
// checks the daemons' own state through their control APIs.
//
// Screenshots are kept in $IFACED_CONSOLE_SHOTS (default: a directory
// under the test's temporary directory, named in its log; CI keeps
// ci-artifacts/console-shots): each step's, and desktop-PAGE.png and
// phone-PAGE.png of every page. With IFACED_CONSOLE_DOCS set to a
// directory, the peer page's first screen at both sizes is also written
// there as console-desktop.png and console-phone.png (256 colours; how
// docs/images/ is made).
//
// The test skips, saying why, when Chromium or Node.js is missing, and
// fails instead when IFACED_REQUIRE_BROWSER=1 (as CI sets it).
package console
