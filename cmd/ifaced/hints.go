package main

import (
	"slices"
	"strings"
)

// Hints that name a command ("run `ifaced caps PEER`", "start one with
// \"ifaced run\"") are for the data directory the user named: when the
// command line gave --home, every hint it prints carries that --home too,
// so that copying the hint acts on the same daemon. Hints come from this
// package and from the control API's errors alike, so they are rewritten
// where they are printed (reportError, and env.hint for the lines a verb
// prints on standard output).

// noHome are the verbs a hint never needs a --home for.
var noHome = []string{"help", "version", "completion", "demo", "COMMAND"}

// explicitHome is the --home a command line gives, "" when none.
func explicitHome(args []string) string {
	home := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		switch {
		case a == "--home" || a == "-home":
			if i+1 < len(args) {
				home = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--home="):
			home = strings.TrimPrefix(a, "--home=")
		case strings.HasPrefix(a, "-home="):
			home = strings.TrimPrefix(a, "-home=")
		}
	}
	return home
}

// withHome adds --home home to each command `ifaced VERB [SUB]` that s
// names in backquotes or double quotes, after the verb and its
// subcommand, unless it has one already.
func withHome(s, home string) string {
	if home == "" {
		return s
	}
	flag := " --home " + shellQuote(home)
	var b strings.Builder
	for {
		i := indexHint(s)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := i + len("`ifaced ")
		end := start
		for end < len(s) && (s[end] >= 'a' && s[end] <= 'z' || s[end] == '-' || s[end] >= 'A' && s[end] <= 'Z') {
			end++
		}
		verb := s[start:end]
		c, known := findCommand(verb)
		if known && c.subs != nil && end < len(s) && s[end] == ' ' {
			sub := end + 1
			subEnd := sub
			for subEnd < len(s) && (s[subEnd] >= 'a' && s[subEnd] <= 'z' || s[subEnd] == '-') {
				subEnd++
			}
			if slices.Contains(c.subs, s[sub:subEnd]) {
				end = subEnd
			}
		}
		b.WriteString(s[:end])
		rest := s[end:]
		if known && !slices.Contains(noHome, verb) && !strings.HasPrefix(rest, " --home") && !strings.HasPrefix(rest, " -h") && !strings.Contains(commandText(rest), "--home") {
			b.WriteString(flag)
		}
		s = rest
	}
}

// indexHint is where the next "`ifaced " or "\"ifaced " starts in s.
func indexHint(s string) int {
	i, j := strings.Index(s, "`ifaced "), strings.Index(s, "\"ifaced ")
	switch {
	case i < 0:
		return j
	case j < 0:
		return i
	}
	return min(i, j)
}

// commandText is the rest of a quoted command: up to its closing quote.
func commandText(rest string) string {
	if i := strings.IndexAny(rest, "`\""); i >= 0 {
		return rest[:i]
	}
	return rest
}

// shellQuote quotes a path for a shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._~+-=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// hint is s with the command line's --home in every command it names.
func (e *env) hint(s string) string { return withHome(s, e.home) }
