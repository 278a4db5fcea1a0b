package mcpagent

import (
	"strings"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
)

func TestCapabilityName(t *testing.T) {
	for _, c := range []struct{ prefix, tool, want, problem string }{
		{"", "echo", "echo", ""},
		{"", "read_file", "read_file", ""},
		{"", "get-sum", "get-sum", ""},
		{"", "getTinyImage", "get_tiny_image", ""},
		{"", "HTTPGet", "httpget", ""},
		{"", "v2Lookup", "v2_lookup", ""},
		{"", "files.readFile", "files.read_file", ""},
		{"everything", "get-sum", "everything.get-sum", ""},
		{"", "2fa", "", "give it one with agent.mcp.tools"},
		{"", "_private", "", "not dot notation"},
		{"", "a..b", "", "not dot notation"},
		{"", "has space", "", "not an MCP tool name"},
		{"", "", "", "not an MCP tool name"},
		{"", strings.Repeat("a", 129), "", "not an MCP tool name"},
		{"p", strings.Repeat("a", 128), "", "at most 128"},
	} {
		got, err := CapabilityName(c.prefix, c.tool)
		switch {
		case c.problem == "" && (err != nil || got != c.want):
			t.Errorf("CapabilityName(%q, %q) = %q, %v; want %q", c.prefix, c.tool, got, err, c.want)
		case c.problem != "" && (err == nil || !strings.Contains(err.Error(), c.problem)):
			t.Errorf("CapabilityName(%q, %q) = %q, %v; want an error saying %q", c.prefix, c.tool, got, err, c.problem)
		case err == nil && negotiate.CheckName(got) != nil:
			t.Errorf("CapabilityName(%q, %q) = %q, which is no capability name", c.prefix, c.tool, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want []string // field: problem fragments, one per error
	}{
		{"stdio", Config{Command: "mcp-server", Args: []string{"--stdio"}, Env: []string{"TOKEN=x"}}, nil},
		{"url", Config{URL: "http://127.0.0.1:3001/mcp"}, nil},
		{"overlays", Config{Command: "s", Prefix: "files",
			Default: &Overlay{Conditions: map[string]any{"min_disclosure": "professional"}},
			Tools: map[string]Overlay{"readFile": {Advertise: "when-eligible", Price: &Price{Amount: "0.5", Currency: "USD"}},
				"2fa": {Name: "auth.two_factor"}}}, nil},
		{"neither", Config{}, []string{"agent.mcp: names no server"}},
		{"both", Config{Command: "s", URL: "http://x/mcp"}, []string{"agent.mcp.url: is set beside command"}},
		{"bad url", Config{URL: "ftp://x"}, []string{"agent.mcp.url: \"ftp://x\" is not an http(s) URL"}},
		{"args with url", Config{URL: "http://x/mcp", Args: []string{"a"}}, []string{"agent.mcp.args: args, env, inherit_env and dir go with command"}},
		{"inherit_env with url", Config{URL: "http://x/mcp", InheritEnv: []string{}}, []string{"agent.mcp.args: args, env, inherit_env and dir go with command"}},
		{"env", Config{Command: "s", Env: []string{"NOEQUALS"}}, []string{"agent.mcp.env[0]: \"NOEQUALS\" is not KEY=value"}},
		{"inherit_env", Config{Command: "s", InheritEnv: []string{"PATH", "TOKEN=x", ""}},
			[]string{"agent.mcp.inherit_env[1]: \"TOKEN=x\" is not the name of an environment variable", "agent.mcp.inherit_env[2]: \"\" is not the name"}},
		{"prefix", Config{Command: "s", Prefix: "Files"}, []string{"agent.mcp.prefix: invalid capability name"}},
		{"default name", Config{Command: "s", Default: &Overlay{Name: "x"}}, []string{"agent.mcp.default.name: a name belongs to one tool"}},
		{"default condition", Config{Command: "s", Default: &Overlay{Conditions: map[string]any{"min_disclosure": "friends"}}},
			[]string{"agent.mcp.default.conditions.min_disclosure"}},
		{"unknown condition", Config{Command: "s", Tools: map[string]Overlay{"echo": {Conditions: map[string]any{"min_mood": "happy"}}}},
			[]string{"agent.mcp.tools.echo.conditions"}},
		{"advertise", Config{Command: "s", Tools: map[string]Overlay{"echo": {Advertise: "never"}}},
			[]string{"agent.mcp.tools.echo.advertise: \"never\""}},
		{"price", Config{Command: "s", Tools: map[string]Overlay{"echo": {Price: &Price{Amount: "cheap", Currency: "USD"}}}},
			[]string{"agent.mcp.tools.echo.price.amount"}},
		{"unmappable", Config{Command: "s", Tools: map[string]Overlay{"2fa": {}}}, []string{"agent.mcp.tools.2fa: tool \"2fa\" maps to no capability name"}},
		{"bad name", Config{Command: "s", Tools: map[string]Overlay{"echo": {Name: "Echo"}}}, []string{"agent.mcp.tools.echo.name: invalid capability name"}},
		{"same name", Config{Command: "s", Tools: map[string]Overlay{"echo": {Name: "x.y"}, "say": {Name: "x.y"}}},
			[]string{"agent.mcp.tools.say: gives capability name \"x.y\", as tool \"echo\" does"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := c.cfg.Validate(conditions.DefaultTierOrder())
			if len(errs) != len(c.want) {
				t.Fatalf("got %d errors %v, want %d %q", len(errs), errs, len(c.want), c.want)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), c.want[i]) {
					t.Errorf("error %q does not say %q", e, c.want[i])
				}
			}
		})
	}
}
