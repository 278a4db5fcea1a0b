package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// familyRE finds the names of families in a document or a query.
var familyRE = regexp.MustCompile(`\b(?:ifaced|go|process)_[a-z0-9_]+`)

// TestDocsNameTheFamilies: docs/metrics.md lists every family of ifaced's
// own, and it and the dashboard (docs/dashboards/ifaced.json) name no
// family the daemon does not expose.
func TestDocsNameTheFamilies(t *testing.T) {
	exposed := map[string]bool{}
	var ours []string
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, d := range allDescs {
		name := fqName.FindStringSubmatch(d.String())[1]
		ours = append(ours, name)
		exposed[name] = true
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		exposed[f.GetName()] = true
	}
	known := func(name string) bool {
		for _, suffix := range []string{"", "_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && exposed[base] {
				return true
			}
		}
		return false
	}

	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ours {
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/metrics.md has no row for %s", name)
		}
	}
	for _, name := range familyRE.FindAllString(string(doc), -1) {
		if !known(name) {
			t.Errorf("docs/metrics.md names %s, which the daemon does not expose", name)
		}
	}

	raw, err := os.ReadFile("../../docs/dashboards/ifaced.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/dashboards/ifaced.json: %v", err)
	}
	var queried []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range familyRE.FindAllString(tg.Expr, -1) {
				queried = append(queried, name)
				if !known(name) {
					t.Errorf("dashboard panel %q queries %s, which the daemon does not expose", p.Title, name)
				}
			}
		}
	}
	for _, want := range []string{"ifaced_greetings_total", "ifaced_door_step_duration_seconds_bucket", "ifaced_door_refusals_total",
		"ifaced_memory_budget_used_bytes", "ifaced_audit_used_bytes", "ifaced_peers_connected"} {
		if !slices.Contains(queried, want) {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}
}
