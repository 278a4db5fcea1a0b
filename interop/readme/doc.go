// Package readme runs the documents against the code, so that neither
// README.md nor anything under docs/ can drift from what the daemon does.
// It holds only tests.
//
// # Every command block runs
//
// Each document (README.md, then every .md file under docs/) is one
// walkthrough, run in order as a user would run it (TestDocuments):
//
//   - The commands of every sh block go, one at a time, to one bash
//     process, so what a command sets (a variable, the working directory,
//     PATH, an alias the daemon keeps) holds for the next block. $HOME is
//     a fresh directory per document (~/tutorial is the test's), the
//     working directory is a clone's top level (the repository's entries
//     linked into a fresh directory, so a command that writes there
//     writes in the test's), ifaced and the example agent, built once,
//     are on PATH, and GOPATH is under $HOME.
//   - `go run ./cmd/ifaced ARGS` runs the built ifaced, `go install
//     ./cmd/ifaced` puts it in $GOPATH/bin; any other go command fails,
//     saying to mark its block.
//   - A command that runs until it is stopped (`ifaced run`, `go run
//     ./cmd/ifaced run`, the Go and Python example agents) runs in a
//     terminal of its own, the one the last "# terminal N" line named;
//     the walkthrough goes on once it is ready (a daemon when `ifaced
//     status` answers, an agent when its log shows what the document
//     shows under it, or says it listens). "# stop it (Ctrl-C in terminal
//     N)" interrupts what runs there; "# start it again in terminal N"
//     runs its command again. Any other comment line on its own is an
//     error: an instruction the test would skip fails it instead.
//   - Comment lines right under a command are its output: each must be
//     found in the output, in order, … standing for anything (lazily);
//     output shown as JSON ({ or [ first) is compared whole without white
//     space. "(exit status N)" is the exit status shown (0 when none is);
//     "(within a few seconds)" says the output comes from something in
//     the background, and the command runs again until it shows it, for
//     up to a minute, while it answers "not yet" the same way each time
//     (the document's exit status with other output, or one unchanging
//     refusal); a run that fails otherwise fails the step at once.
//   - <!-- file: PATH --> before a json or toml block writes it to PATH
//     (~ the session's $HOME) when the walkthrough reaches it.
//   - <!-- not run: REASON --> before an sh block keeps it from running;
//     the reason is logged. Every other fence names its language (text,
//     json, toml): a fence that names none or another fails the test, as
//     does a marker that is malformed or stands before no fence.
//
// Some lines carry claims the output cannot show (the data directory's
// modes after the first run, the demo's last line naming a section, a
// relay's trace entry naming the relay): the checks table holds them,
// keyed by the document and the line as written; a check whose line is
// gone fails the test.
//
// # What the test changes, and why
//
// The documents' ports (48xx for daemons, 808x for agents) are taken on a
// shared machine by other tests and daemons, so each walkthrough maps each
// of them to a free port, in commands, files and expected output alike;
// a daemon whose home has no config yet gets --listen and --api on those
// ports, and one with a config has its ports mapped in the file. Tests
// run only on loopback, so 0.0.0.0 and :: are rewritten to 127.0.0.1 and
// ::1, and mDNS is off (--no-mdns, or discovery.mdns = false) so no
// daemon multicasts on the machine's networks.
//
// # Beside the walkthroughs
//
// TestDocumentsHaveNoDeadEnds follows every relative link;
// TestREADMEIsAFrontPage keeps README.md within 250 lines, naming the
// setup command, the test command and docs/; TestSystemdUnit verifies the
// user unit docs/operations.md installs (its systemctl block needs a user
// manager, which a test has not). The references in docs/reference are
// generated from the code, and cmd/ifaced's TestReferenceDocs fails when
// they differ.
package readme
