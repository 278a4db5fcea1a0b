package mcpagent

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ifaced/ifaced/negotiate"
)

// toolNameRE is the MCP tool name rule (SEP-986): 1 to 128 of ASCII
// letters, digits, '_', '-' and '.'.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// CapabilityName maps an MCP tool name onto the document's dot notation
// (negotiate.CheckName): prefix (when set) and a dot, then the tool name
// with each dot-separated segment lowercased, an underscore put before an
// upper-case letter that follows a lower-case letter or digit (getSum →
// get_sum, get-sum and read_file stay as they are). A name that maps to no
// capability name (a segment that does not start with a letter, an empty
// segment, too long) is an error saying so; an overlay's name gives such a
// tool a name of the owner's choosing.
//
// The mapping is not injective on every possible name (getSum and get_sum
// both give get_sum), so the agent keeps the table of the tools it offers
// and leaves out a tool whose capability name another tool already has:
// for the tools offered, capability → tool is exact (Agent.Tool).
func CapabilityName(prefix, tool string) (string, error) {
	if !toolNameRE.MatchString(tool) {
		return "", fmt.Errorf("%q is not an MCP tool name (1 to 128 letters, digits, '_', '-' and '.')", tool)
	}
	segs := strings.Split(tool, ".")
	for i, s := range segs {
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			c := s[j]
			if c >= 'A' && c <= 'Z' {
				if j > 0 && (s[j-1] >= 'a' && s[j-1] <= 'z' || s[j-1] >= '0' && s[j-1] <= '9') {
					b.WriteByte('_')
				}
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
		segs[i] = b.String()
	}
	name := strings.Join(segs, ".")
	if prefix != "" {
		name = prefix + "." + name
	}
	if err := negotiate.CheckName(name); err != nil {
		return "", fmt.Errorf("tool %q maps to no capability name (%v); give it one with agent.mcp.tools.%q.name", tool, err, tool)
	}
	return name, nil
}
