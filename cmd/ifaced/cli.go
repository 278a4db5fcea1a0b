package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
)

// The generic command line: one flag parser for every verb, with flags
// allowed anywhere among the arguments, help on standard output, "did you
// mean" for mistyped verbs and flags, and errors as JSON on standard error
// when the command line asked for --json. Verbs declare their flags on a
// *flags and call parse; everything else here is shared.
//
// Decisions:
//   - The standard library's flag package stays (no CLI framework): parse
//     calls it repeatedly, taking one positional argument out each time it
//     stops, which is what lets `caps validate FILE --json` work.
//   - The flag package prints nothing itself (its output is discarded);
//     -h prints the verb's usage on standard output and exits 0, a mistake
//     is a usage error (exit 2) that names the flag and suggests the
//     nearest one.
//   - Shell completion reads the flags from the verbs themselves: a verb
//     run with env.introspect set hands its *flags over at parse and
//     returns errIntrospected before doing anything else, so the completion
//     scripts cannot drift from the flags the verbs accept.

// flags is the common flag set of a command.
type flags struct {
	*flag.FlagSet
	e        *env
	name     string // "caps validate"
	argsHelp string
	pos      []string // the positional arguments, after parse
	home     string
	json     bool
}

func newFlags(e *env, name, argsHelp string, withJSON bool) *flags {
	f := &flags{FlagSet: flag.NewFlagSet("ifaced "+name, flag.ContinueOnError), e: e, name: name, argsHelp: argsHelp}
	f.SetOutput(io.Discard)
	f.StringVar(&f.home, "home", "", "data directory (default $"+config.EnvHome+", else ~/.ifaced)")
	if withJSON {
		f.BoolVar(&f.json, "json", false, "print machine-readable JSON (errors too, on standard error)")
	}
	return f
}

// errIntrospected stops a verb run for shell completion once it has
// declared its flags.
var errIntrospected = errors.New("flags introspected")

// parse reads the flags wherever they stand among the positional
// arguments (`greet PEER --persona work`); everything after "--" is
// positional. Args, NArg and Arg then give the positionals.
func (f *flags) parse(args []string) error {
	if f.e.introspect != nil {
		f.e.introspect(f)
		return &exitError{code: 0, err: errIntrospected}
	}
	f.pos = nil
	for {
		if err := f.FlagSet.Parse(args); err != nil {
			return f.flagError(err)
		}
		rest := f.FlagSet.Args()
		if len(rest) == 0 {
			return nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			f.pos = append(f.pos, rest...)
			return nil
		}
		f.pos = append(f.pos, rest[0])
		args = rest[1:]
	}
}

// parseInterleaved parses and returns the positional arguments.
func (f *flags) parseInterleaved(args []string) ([]string, error) {
	if err := f.parse(args); err != nil {
		return nil, err
	}
	return f.pos, nil
}

// Args, NArg and Arg are the positional arguments parse found.
func (f *flags) Args() []string { return f.pos }
func (f *flags) NArg() int      { return len(f.pos) }
func (f *flags) Arg(i int) string {
	if i < 0 || i >= len(f.pos) {
		return ""
	}
	return f.pos[i]
}

// flagError turns the flag package's error into help (exit 0) or a usage
// error naming the flag, with the nearest known flag when there is one.
func (f *flags) flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		f.printUsage(f.e.stdout)
		return &exitError{code: 0, err: err}
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		msg = fmt.Sprintf("unknown flag --%s", name)
		if s := suggest(name, f.flagNames()); s != "" {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
	}
	return usageError("%s (`ifaced %s -h` lists its flags)", msg, f.name)
}

func (f *flags) flagNames() []string {
	var names []string
	f.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	return names
}

// printUsage writes the verb's usage line and flags.
func (f *flags) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: ifaced %s [flags] %s\n\nFlags:\n", f.name, f.argsHelp)
	f.FlagSet.SetOutput(w)
	f.PrintDefaults()
	f.FlagSet.SetOutput(io.Discard)
}

// takesValue tells a flag that needs a value from a boolean one.
func takesValue(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// suggest is the candidate nearest to word, if it is near enough to be
// the word mistyped (an edit distance of at most a third of its length,
// and at most 2), or a candidate word is the start of; "" otherwise.
func suggest(word string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := editDistance(word, c)
		if d < bestD && d <= max(1, len(word)/3) {
			best, bestD = c, d
		}
	}
	if best != "" {
		return best
	}
	var prefixed []string
	for _, c := range candidates {
		if len(word) >= 2 && strings.HasPrefix(c, word) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of two neighbours
// ("jsno" for "json") cost one each. It counts bytes: verbs, flags and
// keys are ASCII.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// wantsJSON tells whether a command line asked for --json, read from the
// words themselves so that an error in parsing the flags is JSON too.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		switch a {
		case "--json", "-json", "--json=true", "-json=true", "--json=1", "-json=1":
			return true
		}
	}
	return false
}

// problemsError is a failure with several problems, each printed on its
// own line (FILE:LINE: field: problem) before the summary, or listed in
// the JSON error.
type problemsError struct {
	summary  string
	problems []string
}

func (e *problemsError) Error() string { return e.summary }

// cliError is what `--json` prints on standard error for a failed
// command: the control API's error shape (error, code, field,
// peer_error), with the command and its exit code.
type cliError struct {
	api.Error
	Command  string   `json:"command"`
	ExitCode int      `json:"exit_code"`
	Problems []string `json:"problems,omitempty"`
}

// Codes of a cliError that did not come from the control API.
const (
	codeUsage  = "usage_error"
	codeFailed = "failed"
)

// reportError prints a command's failure on standard error, as text or,
// when asked, as one JSON object.
func reportError(e *env, command string, err error, code int, asJSON bool) {
	var pe *problemsError
	errors.As(err, &pe)
	var ae *api.Error
	if errors.As(err, &ae) && ae.PeerError != nil {
		// What a peer answered is the peer's words, and its hints are
		// for the peer's owner: no --home of ours goes into them.
		plain := *e
		plain.home = ""
		e = &plain
	}
	if !asJSON {
		if pe != nil {
			for _, p := range pe.problems {
				fmt.Fprintln(e.stderr, e.hint(p))
			}
		}
		prefix := "ifaced"
		if command != "" {
			prefix += " " + command
		}
		fmt.Fprintln(e.stderr, prefix+": "+e.hint(err.Error()))
		return
	}
	out := cliError{Command: command, ExitCode: code}
	out.Message = e.hint(err.Error())
	switch {
	case errors.As(err, &ae):
		out.Error = *ae
		out.Message = e.hint(err.Error()) // with the context the client added
	case code == 2:
		out.Code = codeUsage
	default:
		out.Code = codeFailed
	}
	if pe != nil {
		out.Problems = slices.Clone(pe.problems)
	}
	writeJSON(e.stderr, out)
}
