// Command ifaced is the Inter-Face daemon and its command line: `ifaced run`
// is the daemon, and the other verbs set it up or talk to it. This package
// holds flags, output and exit codes only; the work is in the packages it
// calls.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/ifaced/ifaced/node/api"
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
	subs    []string // its subcommands, the first positional argument (for help and completion)
}

// env is what a command may touch: its output streams and environment.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader // nil reads as empty
	getenv         func(string) string
	// introspect, when set, receives a verb's flags at parse, and the verb
	// stops there (shell completion reads the flags this way).
	introspect func(*flags)
	// home is the --home the command line gave, for hints (hints.go).
	home string
}

func commands() []command {
	return []command{
		{"init", "create the data directory, key and config", runInit, nil},
		{"id", "print this daemon's peer ID, did:key and key fingerprint", runID, nil},
		{"run", "run the daemon", runDaemon, nil},
		{"status", "show the running daemon: identity, addresses, document, counts", runStatus, nil},
		{"peers", "list the peers the daemon knows, with the age of their views", runPeers, nil},
		{"connect", "connect to a peer by multiaddr (connect MULTIADDR)", runConnect, nil},
		{"greet", "open a conversation with a peer and show what each side granted (greet PEER)", runGreet, nil},
		{"conversations", "list the open conversations, show one, or close one (conversations [list | show ID|--peer P | close ID|--peer P])", runConversations, conversationSubs},
		{"caps", "show, add, remove or validate capabilities (caps [PEER] | add FILE | remove NAME | validate FILE)", runCapsCommand, []string{"add", "remove", "validate"}},
		{"say", "send a message in an open conversation (say CONVERSATION|PEER --phase P --text TEXT)", runSay, nil},
		{"send", "say something to a peer, through its mailbox relay if it is away (send PEER --text TEXT)", runSend, nil},
		{"outbox", "list messages waiting to be left at a peer's mailbox", runOutbox, nil},
		{"import", "bring in an outside agent: AG-UI /capabilities, A2A agent card or orchestrator /capabilities (import URL | --list | --remove URL)", runImport, nil},
		{"policy", "show or change the disclosure map and temperature caps (policy [disclosure PEER TIER | temperature PEER MAX])", runPolicy, []string{"disclosure", "temperature"}},
		{"invoke", "ask a peer to run one of its capabilities (invoke PEER CAPABILITY --params JSON)", runInvoke, nil},
		{"mcp", "serve the running daemon to an MCP client (an LLM agent) on standard input and output", runMCP, nil},
		{"ui", "open the owner's console in a browser: print (and where it can, open) a one-time login URL (ui [--no-open])", runUI, nil},
		{"find", "find daemons offering a capability through the DHT, and whether you meet its conditions (find CAPABILITY [--min-version V])", runFind, nil},
		{"trust", "show what the daemon established about peers, or pin, revoke or check one (trust [PEER [--verify FINGERPRINT | --revoke | --check]])", runTrust, nil},
		{"key", "rotate this daemon's key, revoke an old one, or prepare a revocation statement to keep offline (key rotate | revoke [OLD-PEER | --statement FILE] | revocation-statement)", runKey, keySubs},
		{"introduce", "mint an introduction token for a peer whose key you do not know yet (introduce --label NAME | --list | --revoke ID)", runIntroduce, nil},
		{"accept-intro", "hold an introduction token another daemon minted for this one (accept-intro, the token on standard input or --secret-file FILE)", runAcceptIntro, nil},
		{"audit", "list recorded conversations, show one, why a request was decided, or prove it (audit [--conversation ID] [--peer P] [--why MESSAGE_ID] | verify | export --conversation ID | verify-bundle FILE)", runAudit, auditSubs},
		{"store", "repair a damaged store file: copy what is readable into a new one (store salvage)", runStore, storeSubs},
		{"alias", "name peers locally: list, set or remove an alias (alias [NAME PEER | --remove NAME])", runAlias, nil},
		{"config", "show the effective configuration, or set one key (config [show | set KEY VALUE | keys])", runConfig, configSubs},
		{"completion", "print a shell completion script (completion bash | zsh | fish)", runCompletion, completionShells},
		{"demo", "run three daemons in this process and show them greet and negotiate", runDemo, nil},
		{"version", "print the version (also --version)", runVersion, nil},
		{"help", "print this list, or a command's flags (help [COMMAND])", runHelp, nil},
	}
}

// findCommand looks a verb up in the table.
func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

// version is set at build time with -ldflags "-X main.version=…"; a
// binary built by `go install …@v1.2.3` reports its module version.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches one command line and returns the exit code: 0 success, 1
// failure, 2 usage error.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stdout)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		args[0] = "help"
	case "-version", "--version":
		args[0] = "version"
	}
	asJSON := wantsJSON(args)
	e.home = explicitHome(args[1:])
	c, ok := findCommand(args[0])
	if !ok {
		reportError(e, "", unknownCommand(args[0]), 2, asJSON)
		return 2
	}
	err := c.run(ctx, e, args[1:])
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.code == 0: // -h: the usage went to standard output
		return 0
	}
	code := 1
	switch {
	case ee != nil:
		code = ee.code
	case badWords(c.name, args[1:], err):
		code = 2
	}
	reportError(e, c.name, err, code, asJSON)
	return code
}

// badWords tells a mistake in the command line the daemon found from one
// it could not have: the control API answers 400 naming the request
// member at fault, and every such member a verb sends comes from its
// arguments and flags; except for what a verb reads from elsewhere, a
// problem of which is not the command line's (exit 1): `caps add` sends
// the file it names, `accept-intro` the token on standard input or in a
// file. A fingerprint that is well formed but not the peer's key's
// (`trust PEER --verify FP`) is a refusal, not a mistake in the words: the
// key is not the one its owner read out, which may be an impostor's.
func badWords(verb string, args []string, err error) bool {
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field == "" {
		return false
	}
	switch verb {
	case "accept-intro":
		return false
	case "trust":
		return ae.Field != "verify" || !wellFormedFingerprint(flagValue(args, "verify"))
	case "caps":
		return firstPositional(args) < 0 || args[firstPositional(args)] != "add"
	}
	return true
}

// flagValue is the value the command line gives flag name (--name V or
// --name=V), "" when none.
func flagValue(args []string, name string) string {
	v := ""
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
		switch {
		case args[i] == "--":
			return v
		case a == name && i+1 < len(args):
			v = args[i+1]
			i++
		case strings.HasPrefix(a, name+"="):
			v = strings.TrimPrefix(a, name+"=")
		}
	}
	return v
}

// wellFormedFingerprint: fp has the form `ifaced id` prints a key
// fingerprint in (SHA256: and the digest, unpadded base64).
func wellFormedFingerprint(fp string) bool {
	digest, ok := strings.CutPrefix(fp, "SHA256:")
	b, err := base64.RawStdEncoding.DecodeString(digest)
	return ok && err == nil && len(b) == sha256.Size
}

func unknownCommand(name string) error {
	if strings.HasPrefix(name, "-") {
		return usageError("%s: flags follow the command (`ifaced COMMAND %s`; run `ifaced help` for the list)", name, name)
	}
	msg := fmt.Sprintf("unknown command %q", name)
	if s := suggest(name, commandNames()); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return usageError("%s (run `ifaced help` for the list)", msg)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "ifaced — an Inter-Face peer-to-peer agent daemon")
	fmt.Fprintln(w, "\nUsage: ifaced COMMAND [arguments and flags, in any order]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery command takes --home DIR (default $IFACED_HOME, else ~/.ifaced); commands")
	fmt.Fprintln(w, "that print data take --json (errors are then JSON on standard error too).")
	fmt.Fprintln(w, "A PEER is a peer ID, a did:key, an alias (`ifaced alias`), or a display name")
	fmt.Fprintln(w, "only one known peer uses. Run `ifaced help COMMAND` for a command's flags.")
}

// runHelp is `help [COMMAND [SUBCOMMAND]]`: the list, or a command's
// usage and flags, on standard output.
func runHelp(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		usage(e.stdout)
		return nil
	}
	c, ok := findCommand(args[0])
	if !ok {
		return unknownCommand(args[0])
	}
	if c.name == "help" {
		usage(e.stdout)
		return nil
	}
	return c.run(ctx, e, append(slices.Clone(args[1:]), "-h"))
}

func runVersion(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "version", "", true)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("version takes no arguments, got %q", f.Args())
	}
	bi, _ := debug.ReadBuildInfo()
	v := describeBuild(version, bi)
	if f.json {
		return writeJSON(e.stdout, v)
	}
	fmt.Fprintln(e.stdout, "ifaced", v.Version)
	if v.Revision != "" {
		line := "revision " + v.Revision
		if v.Modified {
			line += " (modified: built with uncommitted changes)"
		}
		if v.Time != "" {
			line += ", committed " + v.Time
		}
		fmt.Fprintln(e.stdout, line)
	}
	return nil
}

// buildVersion is what `ifaced version` says about this binary.
type buildVersion struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"` // the VCS commit it was built from
	Time     string `json:"vcs_time,omitempty"` // that commit's time
	Modified bool   `json:"modified,omitempty"` // built with uncommitted changes
	Go       string `json:"go"`
}

// describeBuild reads the version from the build: the -ldflags one when
// set, else the module version (`go install …@v1.2.3` gives v1.2.3, and
// a build in a git checkout a pseudo-version naming the commit), else
// "dev"; and the VCS revision and dirty flag the go command stamps into a
// build made in a checkout (-buildvcs, on by default; `go run` and `go
// test` stamp none).
func describeBuild(ldflags string, bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: ldflags, Go: runtime.Version()}
	if bi == nil {
		return v
	}
	if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// versionString is the version in one word, as the MCP server reports it.
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	v := describeBuild(version, bi)
	if v.Version == "dev" && v.Revision != "" {
		r := v.Revision
		if len(r) > 12 {
			r = r[:12]
		}
		v.Version += "-" + r
		if v.Modified {
			v.Version += "+dirty"
		}
	}
	return v.Version
}
