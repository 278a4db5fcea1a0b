package readme

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// block is one marked fenced block of README.md.
type block struct {
	name  string // the marker's example name
	file  string // file=FILE: the block is data, written to FILE
	line  int    // README line of the block's first line inside the fence
	lines []string
}

var markerRE = regexp.MustCompile(`^<!-- example: ([a-z0-9-]+)(?: file=(\S+))? -->$`)

// readBlocks returns README.md's marked blocks, and an error for a marker
// not followed by a fence and for an unmarked sh block in one of the
// sections named.
func readBlocks(path string, sections []string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the README: %w", err)
	}
	defer f.Close()
	var (
		blocks  []block
		pending *block // a marker waiting for its fence
		cur     *block // inside a marked fence
		inFence bool   // inside any fence
		section string
		problem []string
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case inFence && strings.HasPrefix(l, "```"):
			inFence = false
			if cur != nil {
				blocks = append(blocks, *cur)
				cur = nil
			}
		case inFence:
			if cur != nil {
				cur.lines = append(cur.lines, l)
			}
		case strings.HasPrefix(strings.TrimSpace(l), "```"):
			inFence = true
			if pending != nil {
				pending.line = n + 1
				cur, pending = pending, nil
			} else if strings.TrimSpace(l) == "```sh" && contains(sections, section) {
				problem = append(problem, fmt.Sprintf("README.md:%d: an sh block in %q without an <!-- example: NAME --> marker", n, section))
			}
		case pending != nil && strings.TrimSpace(l) != "":
			problem = append(problem, fmt.Sprintf("README.md:%d: the example marker above is not followed by a fenced block", n))
			pending = nil
		default:
			if m := markerRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
				pending = &block{name: m[1], file: m[2]}
			} else if strings.HasPrefix(l, "#") {
				section = strings.TrimSpace(strings.TrimLeft(l, "#"))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the README: %w", err)
	}
	if len(problem) > 0 {
		return blocks, fmt.Errorf("%s", strings.Join(problem, "\n"))
	}
	return blocks, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.HasPrefix(s, x) {
			return true
		}
	}
	return false
}

// step is one thing an sh block asks for.
type step struct {
	line    int      // README line
	cmd     string   // a command, without its trailing comment; empty for narration and edits
	comment string   // its trailing comment, or the narration's text
	expect  []string // the output shown under a command
	edit    *edit    // a config edit
}

// edit is one "#   [section] key = value" line under "in ~/H/config.toml:".
type edit struct {
	file, section, key, value string
}

var (
	editsFollowRE = regexp.MustCompile(`in (~/\S+/config\.toml):$`)
	editRE        = regexp.MustCompile(`^\s+\[([a-z_.]+)\]\s+([a-z_]+)\s*=\s*(.+)$`)
)

// parseSteps reads an sh block into steps.
func parseSteps(b block) []step {
	var (
		steps   []step
		cur     = -1 // index of the command whose output lines may follow
		editing string
	)
	for i, raw := range b.lines {
		n := b.line + i
		text := strings.TrimSpace(raw)
		switch {
		case text == "":
			cur, editing = -1, ""
		case strings.HasPrefix(text, "#"):
			body := strings.TrimPrefix(text, "#")
			if m := editRE.FindStringSubmatch(body); editing != "" && m != nil {
				steps = append(steps, step{line: n, edit: &edit{file: editing, section: m[1], key: m[2], value: strings.TrimSpace(m[3])}})
				continue
			}
			if cur >= 0 {
				steps[cur].expect = append(steps[cur].expect, strings.TrimSpace(body))
				continue
			}
			steps = append(steps, step{line: n, comment: strings.TrimSpace(body)})
			if m := editsFollowRE.FindStringSubmatch(body); m != nil {
				editing = m[1]
			}
		default:
			cmd, comment := splitComment(text)
			steps = append(steps, step{line: n, cmd: cmd, comment: comment})
			cur, editing = len(steps)-1, ""
			if m := editsFollowRE.FindStringSubmatch(comment); m != nil {
				cur, editing = -1, m[1]
			}
		}
	}
	return steps
}

// splitComment cuts a shell line at its comment: a # outside quotes that
// follows white space.
func splitComment(l string) (cmd, comment string) {
	var quote byte
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && i > 0 && (l[i-1] == ' ' || l[i-1] == '\t'):
			return strings.TrimSpace(l[:i]), strings.TrimSpace(l[i+1:])
		}
	}
	return strings.TrimSpace(l), ""
}

// globRE compiles an expected output, with … standing for anything;
// whole: it must be all of the text, not a part.
func globRE(s string, whole bool) *regexp.Regexp {
	parts := strings.Split(s, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := strings.Join(parts, ".*")
	if whole {
		re = "^" + re + "$"
	}
	return regexp.MustCompile("(?s)" + re)
}

// matchOutput checks output against the lines the README shows under its
// command: as JSON (white space ignored) when they start with { or [,
// else each line in turn, found in the output after the one before it (…
// may stand for several lines, as for an error that quotes a dial's
// attempts).
func matchOutput(out string, expect []string) error {
	if len(expect) == 0 {
		return nil
	}
	if strings.HasPrefix(expect[0], "{") || strings.HasPrefix(expect[0], "[") {
		want := stripSpace(strings.Join(expect, ""))
		if !globRE(want, true).MatchString(stripSpace(out)) {
			return fmt.Errorf("the output does not match the README's (white space ignored, … for anything)\nREADME: %s\ngot:    %s", strings.Join(expect, "\n        "), out)
		}
		return nil
	}
	rest := out
	for _, e := range expect {
		loc := globRE(e, false).FindStringIndex(rest)
		if loc == nil {
			return fmt.Errorf("the output does not show the README's %q (after the lines before it)\ngot:\n%s", e, out)
		}
		rest = rest[loc[1]:]
	}
	return nil
}

func stripSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\t' || r == '\r' {
			return -1
		}
		return r
	}, s)
}
