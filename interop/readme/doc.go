// Package readme runs the examples of README.md against the code, so the
// README cannot drift from what the daemon does: the walkthroughs (two
// daemons; a relay and its mailbox), the HTTP binding's curl examples,
// `caps validate` and `caps add` with the README's own file, the quick
// start, the demo and the systemd unit. It holds only tests.
//
// # Which examples run
//
// A fenced block is an example when the line before it is a marker:
//
//	<!-- example: NAME -->             an sh block, run as described below
//	<!-- example: NAME file=FILE -->   a data block, written to FILE first
//
// Every marker needs a runner here and every runner a marker, and in the
// sections that are walkthroughs (readme_test.go, walkthroughSections)
// every sh block must be marked: a new example cannot be left out by
// accident.
//
// # How an sh block is read
//
// The block stays literal for people; the test reads it as one would who
// had three terminals:
//   - A command runs with sh in a working directory holding the ifaced
//     binary (built once, for `go build ./cmd/ifaced`; `go run
//     ./cmd/ifaced` runs it too) and the block's files, with $HOME a fresh
//     temporary directory, so `~/alice` is the test's. It must exit 0.
//   - `ifaced run` starts a daemon in the background (another terminal)
//     and waits until `ifaced status` answers; the block's daemons stop at
//     its end.
//   - Comment lines right under a command (no blank line between) are its
//     output as the README shows it: each must match, in order, with …
//     standing for anything; output shown as JSON is compared without
//     white space.
//   - A command whose comment ends "in ~/H/config.toml:" is followed by
//     lines "#   [section] key = value": the test sets them in that file.
//   - Placeholders (<Alice's peer ID>, <R>, <B>) are the peer IDs of those
//     homes; any other <…> left in a command is an error.
//   - Other comment lines are narration; each must be one the test knows
//     ("terminal 2: …", "stop B …", "start B again …"), so an instruction
//     the test would skip fails it instead.
//
// Some lines carry claims the output format cannot show (the data
// directory's modes, a view at the next seq, mail delivered): the checks
// table holds them, keyed by the README line, and a check whose line is
// gone fails the test.
//
// # What the test changes, and why
//
// The README's ports (4817, 4818, 4819, 4827, 4828, 4837, 4838) are taken
// on a shared machine by other tests and other daemons, so each block maps
// each of them to a free port, in commands, config edits and expected
// output alike; a daemon whose home has no config yet gets --listen and
// --api on those ports. Tests run only on loopback, so 0.0.0.0 and :: are
// rewritten to 127.0.0.1 and ::1, and mDNS is off (--no-mdns, or
// discovery.mdns = false in an existing config) so no daemon multicasts
// on the machine's networks. `go test ./...` is what CI runs around this
// test, so it is not run again; systemctl needs a user manager, which a
// test does not have, so the unit is checked with `systemd-analyze --user
// verify` instead (skipped, with the reason, where systemd-analyze is
// missing).
//
// # Known failures
//
// Some examples fail today because of bugs being fixed elsewhere (issue
// 19). They are listed in expectedFailures with the issue item; the test
// fails when one of them passes, so an entry cannot outlive its fix:
// delete it when the fix merges.
package readme
