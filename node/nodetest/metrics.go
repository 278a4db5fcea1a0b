package nodetest

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name, as a scraper
// parses the text exposition.
type Families map[string]*dto.MetricFamily

// Scrape GETs url as a scraper would, with the control API's token in the
// Authorization header when token is not "" (never in the URL), and
// parses the answer when it is 200; it returns the status and the body
// too.
func Scrape(t testing.TB, url, token string) (int, Families, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, string(body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("scraping %s: the exposition does not parse: %v\n%s", url, err, body)
	}
	return resp.StatusCode, fams, string(body)
}

// Value is the sample of family name whose labels include the pairs
// given (name, value, name, value…): a counter's, gauge's or untyped
// value, or a histogram's count; 0 when there is none. Several samples
// matching are added up.
func (f Families) Value(name string, labels ...string) float64 {
	fam := f[name]
	if fam == nil {
		return 0
	}
	sum := 0.0
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// LabelValues are every label value of every sample, with the family and
// label it is in ("family{label}").
func (f Families) LabelValues() map[string]string {
	out := map[string]string{}
	for name, fam := range f {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				out[l.GetValue()] = name + "{" + l.GetName() + "}"
			}
		}
	}
	return out
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
