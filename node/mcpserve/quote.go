package mcpserve

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ifaced/ifaced/negotiate"
)

// Bounds on a peer's words as this server passes them on, in bytes of
// the text inside the quotes (a cut ends in "…", within the bound).
const (
	MaxPeerWord   = 64       // a short field that is not a token: version, tier, level, price, code, persona, condition
	MaxPeerName   = 128      // a display name, an agent ID, a capability name that is not short dot notation
	MaxPeerLine   = 512      // advice (how_to_meet), a grant's note, a refusal's message, expected and hint, a part's name
	MaxPeerDesc   = 1 << 10  // a capability's description
	MaxPeerText   = 8 << 10  // a message's text
	MaxPeerResult = 64 << 10 // a peer's result as JSON (more is a tool error: `ifaced invoke` shows it whole)
	maxSchemaText = 256      // a description or title inside a peer's JSON Schema
)

// Quote is text a peer wrote, as this server passes it to a model: cut to
// at most max bytes, then marked as that peer's words and nothing else:
//
//	Peer …x9LmQ2aB wrote: «text» (quoted, untrusted)
//
// Inside the quotes, « and » become ‹ and ›, a line break becomes ⏎, and
// every other control, line-separator or bidirectional-override character
// (and each byte that is not UTF-8) becomes U+FFFD, so the text can
// neither close its quotes nor start a line of its own. The peer is named
// by the end of its peer ID (PeerTag), which the daemon established, never
// by a name the peer chose; with no peer ID it is "The peer".
func Quote(peerID, text string, max int) string {
	who := "The peer"
	if tag := PeerTag(peerID); tag != "" {
		who = "Peer " + tag
	}
	return who + " wrote: «" + cleanText(text, max) + "» (quoted, untrusted)"
}

// PeerTag is how this server names a peer in its own words: "…" and the
// last 8 characters of its peer ID ("" for a string that is not a peer
// ID's base58 text).
func PeerTag(peerID string) string {
	if len(peerID) < 8 || strings.IndexFunc(peerID, func(r rune) bool { return !isAlnum(r) }) >= 0 {
		return ""
	}
	return "…" + peerID[len(peerID)-8:]
}

func isAlnum(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
}

// cleanText makes text safe to put between guillemets and cuts it to at
// most max bytes on a rune boundary, a cut ending in "…".
func cleanText(text string, max int) string {
	var b strings.Builder
	for _, r := range text {
		switch {
		case r == '«':
			b.WriteRune('‹')
		case r == '»':
			b.WriteRune('›')
		case r == '\n':
			b.WriteRune('⏎')
		case r == '\r':
			// part of a line break already shown, or nothing
		case r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || 0x7f <= r && r < 0xa0 || r == 0x2028 || r == 0x2029 ||
			0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
		if b.Len() > max+utf8.UTFMax {
			break // enough to cut from
		}
	}
	return cutText(b.String(), max)
}

// cutText cuts s to at most max bytes on a rune boundary, marking a cut
// with "…".
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	n := max(limit-len("…"), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// tokenRE is a short field that can carry no sentence: lowercase letters,
// digits, '.', '_' and '-' (a tier, a temperature, a version, a code), a
// level as "2 (verified)", or an upper-case code such as a currency.
var tokenRE = regexp.MustCompile(`^(?:[a-z0-9][a-z0-9._-]{0,31}|[0-9]{1,3} \([a-z]{1,16}\)|[A-Z0-9]{2,10}|[0-9]{1,18}(?:\.[0-9]{1,18})?)$`)

// Word is a short field a peer wrote: as it is when it is a token (it can
// carry no sentence), else quoted and cut to MaxPeerWord.
func Word(peerID, s string) string {
	if s == "" || tokenRE.MatchString(s) {
		return s
	}
	return Quote(peerID, s, MaxPeerWord)
}

// capName is a capability's name as a peer wrote it: as it is when it is
// dot notation of at most 64 bytes (then a model can pass it to invoke),
// else quoted and cut to MaxPeerName.
func capName(peerID, name string) string {
	if plainName(name) {
		return name
	}
	return Quote(peerID, name, MaxPeerName)
}

func plainName(name string) bool { return len(name) <= 64 && negotiate.CheckName(name) == nil }

// quoteOrEmpty quotes s, or leaves an empty s empty.
func quoteOrEmpty(peerID, s string, max int) string {
	if s == "" {
		return ""
	}
	return Quote(peerID, s, max)
}

// toolNameRE is the rule tool names follow here, the one LLM APIs share.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ToolName is the name of the tool for a peer's capability, derived by
// this daemon and never taken from the peer:
//
//	peer_<last 8 characters of the peer ID>__<10 characters of a hash>
//
// where the hash is SHA-256 over the peer ID, a zero byte and the
// capability name, in lowercase base32. It is the same for the same peer
// and capability in every run, follows ^[a-zA-Z0-9_-]{1,64}$ (25
// characters), and differs for a different peer or capability unless
// their 50-bit hashes collide; the tools a server holds are kept
// collision-free by leaving out a tool whose name another already has.
func ToolName(peerID, capability string) string {
	tag := strings.TrimPrefix(PeerTag(peerID), "…")
	if tag == "" {
		tag = "unknown0"
	}
	h := sha256.Sum256([]byte(peerID + "\x00" + capability))
	return fmt.Sprintf("peer_%s__%s", tag, strings.ToLower(base32.StdEncoding.EncodeToString(h[:]))[:10])
}

// peerSchema is a peer's JSON Schema as this server passes it on: every
// description and title in it quoted as the peer's (cut to
// maxSchemaText), every $comment and examples left out, and refused when
// another string in it (a property name, an enum value, a pattern) is
// over maxSchemaText bytes or the result is over maxSchemaBytes as JSON.
// nil for nil.
func peerSchema(peerID, field string, v any) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	m, err := boundedSchema(field, v) // a copy, decoded anew
	if err != nil {
		return nil, err
	}
	if err := quoteSchema(peerID, m); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return boundedSchema(field, m)
}

// schemaMaps are the keywords whose value maps names to schemas: their
// keys are names, not keywords.
var schemaMaps = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true}

// quoteSchema rewrites schema s in place (see peerSchema).
func quoteSchema(peerID string, s map[string]any) error {
	for k, v := range s {
		switch {
		case k == "$comment" || k == "examples":
			delete(s, k)
			continue
		case k == "description" || k == "title":
			if str, ok := v.(string); ok {
				s[k] = Quote(peerID, str, maxSchemaText)
				continue
			}
		case schemaMaps[k]:
			if named, ok := v.(map[string]any); ok {
				for name, sub := range named {
					if len(name) > maxSchemaText {
						return fmt.Errorf("a name of %d bytes, over %d", len(name), maxSchemaText)
					}
					if err := quoteSchemaValue(peerID, sub); err != nil {
						return err
					}
				}
				continue
			}
		}
		if len(k) > maxSchemaText {
			return fmt.Errorf("a member name of %d bytes, over %d", len(k), maxSchemaText)
		}
		if err := quoteSchemaValue(peerID, v); err != nil {
			return err
		}
	}
	return nil
}

func quoteSchemaValue(peerID string, v any) error {
	switch v := v.(type) {
	case map[string]any:
		return quoteSchema(peerID, v)
	case []any:
		for _, e := range v {
			if err := quoteSchemaValue(peerID, e); err != nil {
				return err
			}
		}
	case string:
		if len(v) > maxSchemaText {
			return fmt.Errorf("a string of %d bytes, over %d", len(v), maxSchemaText)
		}
	}
	return nil
}
