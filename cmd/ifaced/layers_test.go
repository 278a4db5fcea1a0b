package main

import (
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// layers is the module's dependency order: a package may import only
// packages on a lower layer (the higher the number, the closer to the
// user), never one on its own layer or above. A need the other way is an
// interface the lower package declares, or an event; a new package gets
// its line here, and a package missing from the table fails the test, so
// the order is decided when the package is made, not found later.
var layers = map[string]int{
	// Foundations: no package of this module below them. The module
	// root holds config.example.toml, embedded.
	"":                        0,
	"identity":                0,
	"conditions":              0,
	"node/alias":              0,
	"node/internal/costlru":   0,
	"node/internal/tasks":     0,
	"node/internal/groupsync": 0,
	"examples/agent":          0,
	"examples/python":         0,
	"gossip/auditproof":       1,
	"gossip":                  2,
	"negotiate":               3,
	"node/wire":               4,
	"node/store":              4,
	"node/internal/testkit":   4,
	"node/trust":              5,
	"node/mcpagent":           5,
	"node/internal/peerid":    5,
	"node/internal/tally":     5,
	"node/config":             6,
	"node/events":             7,
	"node/policy":             7,
	"node/internal/ratelimit": 7,
	"node/p2phost":            7,
	// The components the assembly wires.
	"node/admit":  8,
	"node/owner":  8,
	"node/invoke": 8,
	"node/keys":   8,
	"node/capdht": 8,
	// The components built on those (mail sends in conversations).
	"node/keys/tell": 9,
	"node/converse":  9,
	"node/mail":      10,
	// Discovery asks the peers it finds for their views (converse).
	"node/discovery": 11,
	// The daemon's figures, read from the components above.
	"node/metrics": 12,
	// The assembly and its façade.
	"node": 20,
	// What serves the façade to people and programs.
	"node/api":      21,
	"node/nodetest": 21,
	"node/httpapi":  21,
	"node/mcpserve": 22,
	"node/console":  22,
	"node/demo":     22,
	// Programs and the tests that drive them from outside.
	"cmd/ifaced":                       23,
	"examples/agent/cmd/example-agent": 23,
	"interop/netlab":                   23,
	"interop/netlab/dhtnode":           23,
	"interop/hostile":                  24,
	"interop/console":                  24,
	"interop/readme":                   24,
	"interop/jsdeps":                   24,
	"interop/otheruser":                24,
	"interop/compat":                   24,
	"interop/soak":                     25, // drives interop/hostile's target
}

const module = "github.com/ifaced/ifaced"

// TestImportsGoDown fails when a package imports one of this module's
// packages on its own layer or above (layers), or is not in the table.
// Test files may reach anywhere below the program layer: they are not the
// design, only its checks.
func TestImportsGoDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := local(fields[0])
		level, ok := layers[pkg]
		if !ok {
			bad = append(bad, pkg+": not in the layer table (cmd/ifaced/layers_test.go); give it the layer of what it owns")
			continue
		}
		for _, imp := range fields[1:] {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := local(imp)
			if l, ok := layers[to]; ok && l >= level {
				bad = append(bad, pkg+" (layer "+itoa(level)+") imports "+to+" (layer "+itoa(l)+"): imports go down only; declare an interface in "+pkg+" or publish an event instead")
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

func local(importPath string) string {
	return strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
}

func itoa(n int) string { return strconv.Itoa(n) }
