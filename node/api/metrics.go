package api

import "net/http"

// metricsRoutes serve the daemon's Prometheus exposition (node/metrics)
// at GET /metrics, behind the token like every route: a scraper sends
// Authorization: Bearer <the content of api.token>, never the token in
// the URL. metrics.listen serves the same without the token, on an
// address of its own (node/metrics).
type metricsRoutes struct {
	exposition http.Handler
}

func (m *metricsRoutes) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	m.exposition.ServeHTTP(w, r)
}
