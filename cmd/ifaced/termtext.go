package main

import (
	"strings"
	"unicode/utf8"
)

// Bounds on a peer's words as the command line prints them, in bytes.
const (
	maxTermLine = 512     // a line of text: a message's first line, a refusal's advice
	maxTermDesc = 1 << 10 // a capability's description
)

// termText is text someone else wrote (a peer, an outside agent) as a
// terminal shows it: one line, printable, at most max bytes. Control
// characters (an escape sequence could rewrite the screen), line breaks
// and bidirectional overrides become spaces or U+FFFD, bytes that are not
// UTF-8 become U+FFFD, and a cut ends in "…".
func termText(s string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || 0x7f <= r && r < 0xa0 || r == 0x2028 || r == 0x2029 ||
			0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
		if b.Len() > max+utf8.UTFMax {
			break
		}
	}
	out := b.String()
	if len(out) <= max {
		return out
	}
	n := max - len("…")
	for n > 0 && !utf8.RuneStart(out[n]) {
		n--
	}
	return out[:n] + "…"
}
