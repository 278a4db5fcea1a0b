package readme

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// block is one fenced block of a document.
type block struct {
	doc    string // the document's path, as named in messages
	lang   string // the fence's info string: sh, text, json, toml
	line   int    // the line of its first line inside the fence
	lines  []string
	notRun string // for sh: why it is not run (<!-- not run: REASON -->)
	file   string // for data: the file it is written to (<!-- file: PATH -->)
}

func (b block) where() string { return fmt.Sprintf("%s:%d", b.doc, b.line) }

// Languages a fence may name: sh blocks are commands, the others data or
// output.
var (
	commandLangs = map[string]bool{"sh": true}
	dataLangs    = map[string]bool{"json": true, "toml": true, "text": true}
)

var (
	notRunRE = regexp.MustCompile(`^<!-- not run: (.*\S) -->$`)
	fileRE   = regexp.MustCompile(`^<!-- file: (\S+) -->$`)
	staleRE  = regexp.MustCompile(`^<!-- (example|not run|file)\b`)
)

// readDoc reads a document's fenced blocks, with the marker that stands
// on the line before each. The problems are every fence that names no
// language or one this test does not know, a marker that is malformed,
// stands before no fence or does not fit its block.
func readDoc(path, name string) ([]block, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", name, err)
	}
	defer f.Close()
	var (
		blocks  []block
		problem []string
		cur     *block
		indent  string
		marker  string // the marker on the line before, if any
		markerN int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		l := strings.TrimSpace(raw)
		if cur != nil {
			if l == "```" {
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			cur.lines = append(cur.lines, strings.TrimPrefix(raw, indent))
			continue
		}
		if lang, ok := strings.CutPrefix(l, "```"); ok {
			b := block{doc: name, lang: lang, line: n + 1}
			indent = raw[:len(raw)-len(strings.TrimLeft(raw, " "))]
			switch {
			case lang == "":
				problem = append(problem, fmt.Sprintf("%s:%d: a fence without a language: name it (sh for commands; text, json or toml otherwise)", name, n))
			case !commandLangs[lang] && !dataLangs[lang]:
				problem = append(problem, fmt.Sprintf("%s:%d: a fence of %q: this test knows sh (commands, run) and text, json, toml (data)", name, n, lang))
			}
			if marker != "" && markerN == n-1 {
				if m := notRunRE.FindStringSubmatch(marker); m != nil {
					if lang != "sh" {
						problem = append(problem, fmt.Sprintf("%s:%d: <!-- not run --> stands before a %s block, which is never run", name, n-1, lang))
					}
					b.notRun = m[1]
				} else if m := fileRE.FindStringSubmatch(marker); m != nil {
					if lang == "sh" || lang == "text" {
						problem = append(problem, fmt.Sprintf("%s:%d: <!-- file: … --> stands before a %s block; it writes json or toml", name, n-1, lang))
					}
					b.file = m[1]
				}
			}
			marker = ""
			cur = &b
			continue
		}
		if marker != "" && l != "" {
			problem = append(problem, fmt.Sprintf("%s:%d: the marker %s is not followed by a fenced block", name, markerN, marker))
			marker = ""
		}
		if staleRE.MatchString(l) {
			if !notRunRE.MatchString(l) && !fileRE.MatchString(l) {
				problem = append(problem, fmt.Sprintf("%s:%d: %s: the markers are <!-- not run: REASON --> and <!-- file: PATH -->", name, n, l))
				continue
			}
			marker, markerN = l, n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if cur != nil {
		problem = append(problem, fmt.Sprintf("%s:%d: a fence that never closes", name, cur.line-1))
	}
	if marker != "" {
		problem = append(problem, fmt.Sprintf("%s:%d: the marker %s is not followed by a fenced block", name, markerN, marker))
	}
	return blocks, problem, nil
}

// step is one thing an sh block asks for.
type step struct {
	line    int      // the document's line
	cmd     string   // a command (lines joined by a trailing \ kept, a here-document whole), without its trailing comment; "" for narration
	comment string   // its trailing comment, or the narration's text
	expect  []string // the output shown under a command
	exit    int      // the exit status shown under it, "(exit status N)"; 0 when none is shown
	// eventually: the output shown comes from something in the
	// background ("(within a few seconds)" under the command), so the
	// command is run again until it shows it.
	eventually bool
}

var (
	exitRE    = regexp.MustCompile(`^\(exit status (\d+)\)$`)
	heredocRE = regexp.MustCompile(`<<-?\s*'?"?([A-Za-z_]+)'?"?\s*$`)
)

// parseSteps reads an sh block into steps. Comment lines right under a
// command (no blank line between) are its output; other comment lines
// are narration. A line ending in \ goes on; a here-document (<<'EOF')
// runs to its terminator, both as one command.
func parseSteps(b block) []step {
	var (
		steps []step
		cur   = -1 // index of the command whose output lines may follow
	)
	for i := 0; i < len(b.lines); i++ {
		n := b.line + i
		text := strings.TrimSpace(b.lines[i])
		switch {
		case text == "":
			cur = -1
		case strings.HasPrefix(text, "#"):
			body := strings.TrimSpace(strings.TrimPrefix(text, "#"))
			if cur >= 0 {
				if m := exitRE.FindStringSubmatch(body); m != nil {
					fmt.Sscan(m[1], &steps[cur].exit)
					continue
				}
				if body == "(within a few seconds)" {
					steps[cur].eventually = true
					continue
				}
				steps[cur].expect = append(steps[cur].expect, body)
				continue
			}
			steps = append(steps, step{line: n, comment: body})
		default:
			cmd, comment := splitComment(b.lines[i])
			for strings.HasSuffix(cmd, `\`) && i+1 < len(b.lines) {
				i++
				next, c := splitComment(b.lines[i])
				cmd, comment = cmd+"\n"+next, c
			}
			if m := heredocRE.FindStringSubmatch(cmd); m != nil {
				for i+1 < len(b.lines) {
					i++
					cmd += "\n" + b.lines[i]
					if strings.TrimSpace(b.lines[i]) == m[1] {
						break
					}
				}
			}
			steps = append(steps, step{line: n, cmd: cmd, comment: comment})
			cur = len(steps) - 1
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
	re := strings.Join(parts, ".*?")
	if whole {
		re = "^" + re + "$"
	}
	return regexp.MustCompile("(?s)" + re)
}

// matchOutput checks output against the lines a document shows under its
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
			return fmt.Errorf("the output does not match the document's (white space ignored, … for anything)\ndocument: %s\ngot:      %s", strings.Join(expect, "\n          "), out)
		}
		return nil
	}
	rest := out
	for _, e := range expect {
		loc := globRE(e, false).FindStringIndex(rest)
		if loc == nil {
			return fmt.Errorf("the output does not show the document's %q (after the lines before it)\ngot:\n%s", e, out)
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
