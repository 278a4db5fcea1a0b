package api

import (
	_ "embed"
	"net/http"
)

// The control API's description: an OpenAPI 3.1 document, openapi.json
// beside this file, embedded in the binary and served at
//
//	GET /v1/openapi.json
//
// behind the same token as every other route. The document is public (it
// is in the repository), so the token protects nothing in it; it is
// required anyway so that the hello challenge stays the only answer the
// API gives a caller without the token. An unauthenticated description
// would tell any local process, or a web page reaching loopback through
// DNS rebinding, that an ifaced listens on this port and which version,
// for no gain: a tool that wants the document without a running daemon
// reads the file.
//
// The document is kept true by tests (openapi_test.go): every route the
// server registers is documented and every documented operation is
// routed, and the bodies of real calls to a running daemon are validated
// against its schemas.

// OpenAPIDocument is the OpenAPI 3.1 description of the control API, as
// served at /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPIDocument []byte

// openapi serves the document.
func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(OpenAPIDocument) // the client went away, or not: nothing to do either way
}
