package gossip

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The IFP-3 envelope, written without reflection. The front matter of
// every rendering is what go.yaml.in/yaml/v3's Encoder (SetIndent(2))
// writes for an envelope, and that stays the definition: writeEnvelope
// writes the same bytes by hand when it can show that every value would
// come out of yaml.v3 in a form it knows, and hands the whole envelope
// to yaml.v3 otherwise. Encoding the small flat struct by reflection was
// more than half of what rendering a greeting cost.
//
// What the hand-written path knows how yaml.v3 writes (a block mapping,
// one "key: value" line per field in struct order, omitempty fields left
// out, no line folding: yaml.v3 leaves its line width unlimited):
//
//   - an integer: its decimal digits, plain;
//   - the empty string: "" (written plain it would read back as null);
//   - a plain-safe string (envelopePlain): written as it is;
//   - an RFC 3339 date (envelopeTimestamp): double-quoted, because plain
//     it would read back as a timestamp; its characters need no escape.
//
// Anything else — a string with another character, a string starting with
// a digit or a sign that is not such a date, and languages (a nested
// mapping, absent from what ifaced itself sends) — goes to yaml.v3. The
// rule is deliberately narrower than yaml.v3's: a value it refuses costs
// only time, a value it wrongly accepts would make the rendering differ.

// writeEnvelope writes env as the YAML of the front matter (without the
// --- lines).
func writeEnvelope(out *bytes.Buffer, env *envelope) error {
	if writeEnvelopeFast(out, env) {
		return nil
	}
	return writeEnvelopeYAML(out, env)
}

// writeEnvelopeYAML writes env through yaml.v3: the reference every other
// path must match byte for byte.
func writeEnvelopeYAML(out *bytes.Buffer, env *envelope) error {
	enc := yaml.NewEncoder(out)
	enc.SetIndent(2)
	if err := enc.Encode(env); err != nil {
		return fmt.Errorf("rendering IFP-3 envelope: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("rendering IFP-3 envelope: %w", err)
	}
	return nil
}

// writeEnvelopeFast writes env by hand and reports true, or, when some
// value is not one whose YAML form it knows, leaves out as it was and
// reports false.
func writeEnvelopeFast(out *bytes.Buffer, env *envelope) bool {
	if env.Languages != nil {
		return false
	}
	start := out.Len()
	ok := intLine(out, "ifp", int64(env.IFP)) &&
		stringLine(out, "message-id", env.MessageID) &&
		stringLine(out, "from", env.From) &&
		stringLine(out, "to", env.To) &&
		stringLine(out, "date", env.Date) &&
		stringLine(out, "conversation", env.Conversation) &&
		intLine(out, "sequence", env.Sequence) &&
		stringLine(out, "phase", env.Phase) &&
		(env.Subject == "" || stringLine(out, "subject", env.Subject)) &&
		(env.Disclosure == "" || stringLine(out, "disclosure", env.Disclosure)) &&
		(env.ReplyTo == 0 || intLine(out, "reply-to", env.ReplyTo)) &&
		(env.Persona == "" || stringLine(out, "persona", env.Persona))
	if !ok {
		out.Truncate(start)
	}
	return ok
}

// intLine writes "key: v", an integer being always plain in yaml.v3.
func intLine(out *bytes.Buffer, key string, v int64) bool {
	out.WriteString(key)
	out.WriteString(": ")
	out.Write(strconv.AppendInt(out.AvailableBuffer(), v, 10))
	out.WriteByte('\n')
	return true
}

// stringLine writes "key: v" with v in the form yaml.v3 gives it: quoted
// when empty or a timestamp, plain when plain-safe; for any other v it
// writes nothing and reports false.
func stringLine(out *bytes.Buffer, key, v string) bool {
	quote := false
	switch {
	case v == "":
		quote = true
	case envelopePlain(v):
	case envelopeTimestamp(v):
		quote = true
	default:
		return false
	}
	out.WriteString(key)
	out.WriteString(": ")
	if quote {
		out.WriteByte('"')
	}
	out.WriteString(v)
	if quote {
		out.WriteByte('"')
	}
	out.WriteByte('\n')
	return true
}

// envelopePlain reports whether yaml.v3 writes s as a plain scalar,
// unchanged, for a reason this function can state:
//
//   - s starts with an ASCII letter. A plain scalar starting with a
//     letter resolves to a string unless it is one of YAML's words:
//     true/false/null (in three spellings each) or a YAML 1.1 boolean
//     (y, n, yes, no, on, off, in three spellings), which yaml.v3 quotes
//     for YAML 1.1 readers. Those are refused in any case. Numbers,
//     timestamps, base-60 numbers, .inf/.nan, ~ and the merge key << all
//     start with a digit, a sign, a dot, ~ or <, so the letter rules
//     them out, and also ---, ... and every indicator (- ? : # & * ! | >
//     ' " % @ ` , [ ] { }) at the start.
//   - every byte is a letter, a digit or one of - . _ : / + @ ' and space
//     (ASCII only: no control character, tab, line break or quote that
//     would need escaping, and no # that could start a comment);
//   - a space is followed by a byte other than space (none trailing, none
//     doubled), and a colon by a byte other than space (none at the end):
//     so no ": " (a mapping indicator) and no trailing space.
//
// "did:key:z6Mk…", "msg:01J…", "conv:01J…", phase, tier and persona
// names, and subjects such as "What's current" pass.
func envelopePlain(s string) bool {
	if s == "" || !isASCIILetter(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isASCIILetter(c), c >= '0' && c <= '9':
		case c == '-', c == '.', c == '_', c == '/', c == '+', c == '@', c == '\'':
		case c == ' ', c == ':':
			if i+1 == len(s) || s[i+1] == ' ' {
				return false
			}
		default:
			return false
		}
	}
	if len(s) <= 5 {
		for _, w := range yamlWords {
			if strings.EqualFold(s, w) {
				return false
			}
		}
	}
	return true
}

// yamlWords are the words that start with a letter and that yaml.v3 does
// not write plain (it reads the first three back as a bool or null, and
// quotes the YAML 1.1 booleans). Compared ignoring case, which refuses
// more spellings than yaml.v3 quotes, never fewer.
var yamlWords = [...]string{"true", "false", "null", "y", "yes", "n", "no", "on", "off"}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// yamlTimestampLayout is the layout yaml.v3 first tries on a plain scalar
// starting with four digits and a dash (its RFC 3339 with one- or
// two-digit fields). A value of the shape envelopeTimestamp accepts can
// only match that one of its layouts, since it has an upper-case T.
const yamlTimestampLayout = "2006-1-2T15:4:5.999999999Z07:00"

// envelopeTimestamp reports whether s is an RFC 3339 date-time that
// yaml.v3 reads as a timestamp, and so writes double-quoted: exactly
// YYYY-MM-DDTHH:MM:SS, an optional fraction of 1 to 9 digits, then Z or
// ±HH:MM, which also parses under yamlTimestampLayout. Its characters
// (digits, - : . + T Z) are written inside the quotes unescaped. A value
// of that shape that does not parse (month 13) is not a timestamp to
// yaml.v3, which writes it plain; this function leaves it to yaml.v3.
func envelopeTimestamp(s string) bool {
	// digits reports whether s[i:j] are all ASCII digits.
	digits := func(i, j int) bool {
		for ; i < j; i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	const base = len("2006-01-02T15:04:05")
	if len(s) < base+1 || !digits(0, 4) || s[4] != '-' || !digits(5, 7) || s[7] != '-' || !digits(8, 10) ||
		s[10] != 'T' || !digits(11, 13) || s[13] != ':' || !digits(14, 16) || s[16] != ':' || !digits(17, 19) {
		return false
	}
	rest := s[base:]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return false
		}
		rest = rest[n:]
	}
	switch {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
		rest[1] >= '0' && rest[1] <= '9' && rest[2] >= '0' && rest[2] <= '9' &&
		rest[4] >= '0' && rest[4] <= '9' && rest[5] >= '0' && rest[5] <= '9':
	default:
		return false
	}
	_, err := time.Parse(yamlTimestampLayout, s)
	return err == nil
}
