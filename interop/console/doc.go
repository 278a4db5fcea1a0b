// Package console tests the owner's console (node/console) in a real
// browser: two `ifaced run` daemons, built from cmd/ifaced, greet; `ifaced
// ui --no-open` prints the first one's login URL, and `ifaced ui` with a
// recording xdg-open on PATH hands it a login page's path; and console.mjs
// drives Debian's Chromium through playwright-core (package.json and its
// lock file here, installed with npm ci by interop/jsdeps) through the
// owner's scenarios: log in with the URL, and from the login page file
// (whose SameSite=Strict session must reach the overview although the
// navigation began at a file), see the peer and its view, raise its tier and see the
// view change, pin its key, mint and revoke an introduction, open the
// conversation's audit and its why, watch an event arrive, and be refused
// without a session and with a forged CSRF token. The test then checks
// the daemons' own state through their control APIs.
//
// Screenshots of every step are kept in $IFACED_CONSOLE_SHOTS (default: a
// directory under the test's temporary directory, named in its log). With
// IFACED_CONSOLE_DOCS set to a path, the peer page's picture is also
// written there (how docs/console.png is made).
//
// The test skips, saying why, when Chromium or Node.js is missing, and
// fails instead when IFACED_REQUIRE_BROWSER=1 (as CI sets it).
package console
