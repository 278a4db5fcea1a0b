package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/ifaced/ifaced/node/api"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	peersURI       = "ifaced://peers"
	peerURIPrefix  = "ifaced://peers/"
	auditURIPrefix = "ifaced://audit/"
)

func (s *Service) addResources() {
	s.srv.AddResource(&mcp.Resource{URI: peersURI, Name: "peers", Title: "The peer cache", MIMEType: "application/json",
		Description: "The peers this daemon knows: the peer cache, with each view's age and staleness, and connected peers (as list_peers gives them: what a peer wrote, quoted)."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			out, err := s.peerList(ctx)
			if err != nil {
				return nil, err
			}
			return jsonResource(req.Params.URI, out)
		})
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: peerURIPrefix + "{peer}", Name: "peer-view", Title: "A peer's view",
		MIMEType: "application/json", Description: "The view a peer showed this daemon, as show_peer gives it: its capabilities, which this daemon may use, and for the others what is missing; what the peer wrote, quoted."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			ref, err := uriTail(req.Params.URI, peerURIPrefix)
			if err != nil {
				return nil, err
			}
			pc, err := s.d.PeerCapabilities(ctx, ref, false)
			if err != nil {
				return nil, notFoundOr(req.Params.URI, err)
			}
			return jsonResource(req.Params.URI, s.peerOutput(pc))
		})
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: auditURIPrefix + "{conversation_id}", Name: "conversation-audit",
		Title: "A conversation's audit", MIMEType: "application/json",
		Description: "The last 200 messages of a conversation as this daemon recorded them, as read_conversation gives them (a peer's text quoted, cut to 8 KiB); the audit file it names holds them whole, signatures included."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id, err := uriTail(req.Params.URI, auditURIPrefix)
			if err != nil {
				return nil, err
			}
			a, err := s.d.AuditEntries(ctx, id)
			if err != nil {
				return nil, notFoundOr(req.Params.URI, err)
			}
			return jsonResource(req.Params.URI, conversationOutput(a, 200))
		})
}

// AuditURI is the URI of a conversation's audit resource: its ID
// expanded as RFC 6570 does, every character but the unreserved ones
// percent-encoded (conv:… becomes conv%3A…).
func AuditURI(conversationID string) string {
	var b strings.Builder
	b.WriteString(auditURIPrefix)
	for _, c := range []byte(conversationID) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// uriTail is the percent-decoded rest of uri after prefix.
func uriTail(uri, prefix string) (string, error) {
	tail, ok := strings.CutPrefix(uri, prefix)
	if ok {
		var err error
		if tail, err = url.PathUnescape(tail); err == nil && tail != "" {
			return tail, nil
		}
	}
	return "", fmt.Errorf("%s: want %s followed by a percent-encoded identifier", uri, prefix)
}

// notFoundOr is the SDK's resource-not-found error for a 404, else the
// daemon's explanation.
func notFoundOr(uri string, err error) error {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Code == api.CodeNotFound {
		return mcp.ResourceNotFoundError(uri)
	}
	return explain(err, "")
}

func jsonResource(uri string, v any) (*mcp.ReadResourceResult, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", uri, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}
