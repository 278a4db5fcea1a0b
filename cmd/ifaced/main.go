// Command ifaced is the Inter-Face daemon and its command line: `ifaced run`
// is the daemon, and the other verbs set it up or talk to it. This package
// holds flags, output and exit codes only; the work is in the packages it
// calls.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// exitError carries an exit code up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError is a mistake in the command line itself (exit 2).
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what a command may touch: its output streams and environment.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func commands() []command {
	return []command{
		{"init", "create the data directory, key and config", runInit},
		{"id", "print this daemon's peer ID, did:key and key fingerprint", runID},
		{"run", "run the daemon", runDaemon},
		{"status", "show the running daemon: identity, addresses, document, counts", runStatus},
		{"peers", "list the peers the daemon knows, with the age of their views", runPeers},
		{"connect", "connect to a peer by multiaddr (connect MULTIADDR)", runConnect},
		{"greet", "open a conversation with a peer and show what each side granted (greet PEER)", runGreet},
		{"caps", "show, add, remove or validate capabilities (caps [PEER] | add FILE | remove NAME | validate FILE)", runCapsCommand},
		{"say", "send a message in an open conversation (say CONVERSATION --phase P --text TEXT)", runSay},
		{"send", "say something to a peer, through its mailbox relay if it is away (send PEER --text TEXT)", runSend},
		{"outbox", "list messages waiting to be left at a peer's mailbox", runOutbox},
		{"import", "bring in an outside agent: AG-UI /capabilities, A2A agent card or orchestrator /capabilities (import URL | --list | --remove URL)", runImport},
		{"policy", "show or change the disclosure map and temperature caps (policy [disclosure PEER TIER | temperature PEER MAX])", runPolicy},
		{"invoke", "ask a peer to run one of its capabilities (invoke PEER CAPABILITY --params JSON)", runInvoke},
		{"mcp", "serve the running daemon to an MCP client (an LLM agent) on standard input and output", runMCP},
		{"find", "find daemons offering a capability through the DHT, and whether you meet its conditions (find CAPABILITY [--min-version V])", runFind},
		{"trust", "show what the daemon established about peers, or pin, revoke or check one (trust [PEER [--verify FINGERPRINT | --revoke | --check]])", runTrust},
		{"introduce", "mint an introduction token for a peer whose key you do not know yet (introduce --label NAME | --list | --revoke ID)", runIntroduce},
		{"accept-intro", "hold an introduction token another daemon minted for this one (accept-intro TOKEN)", runAcceptIntro},
		{"audit", "list recorded conversations, or show one (audit [--conversation ID] [--peer P])", runAudit},
		{"demo", "run three daemons in this process and show them greet and negotiate", runDemo},
		{"version", "print the version", runVersion},
	}
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches one command line and returns the exit code: 0 success, 1
// failure, 2 usage error.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, e, args[1:])
		var ee *exitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee) && ee.code == 0: // -h: the flag package printed the usage
			return 0
		}
		fmt.Fprintln(e.stderr, "ifaced "+c.name+": "+err.Error())
		if ee != nil {
			return ee.code
		}
		return 1
	}
	fmt.Fprintf(e.stderr, "ifaced: unknown command %q (run `ifaced help` for the list)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "ifaced — an Inter-Face peer-to-peer agent daemon")
	fmt.Fprintln(w, "\nUsage: ifaced COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery command takes --home DIR (default $IFACED_HOME, else ~/.ifaced);")
	fmt.Fprintln(w, "commands that print data take --json. Run `ifaced COMMAND -h` for its flags.")
}

func runVersion(_ context.Context, e *env, args []string) error {
	fmt.Fprintln(e.stdout, "ifaced", version)
	return nil
}
