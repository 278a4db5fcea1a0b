package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/multiformats/go-multiaddr"
)

// pageData is what every page's template gets.
type pageData struct {
	Title  string
	Nav    string // the menu entry to mark
	CSRF   string
	Notice notice
	Error  string            // why the request was refused; nothing was changed
	Fields map[string]string // the refusal again, beside the form field it concerns (by the field's id)
	Skips  []skip            // links to parts of the page, after "Skip to content"
	D      any               // the page's own
}

// skip is a link from the top of a page to a part of it, for keyboards.
type skip struct{ Href, Text string }

// FieldError is the refusal that concerns the form field id, or "".
func (p *pageData) FieldError(id string) string { return p.Fields[id] }

// refuseField sets the refusal on the page, and beside the field id.
func (p *pageData) refuseField(id, msg string) {
	p.Error = msg
	if id != "" {
		if p.Fields == nil {
			p.Fields = map[string]string{}
		}
		p.Fields[id] = msg
	}
}

// renderer holds the pages: each its template in templates/, inside
// templates/layout.html.
type renderer struct{ pages map[string]*template.Template }

func newRenderer() (*renderer, error) {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	rd := &renderer{pages: map[string]*template.Template{}}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("parsing the console's page %s: %w", name, err)
		}
		rd.pages[name] = t
	}
	return rd, nil
}

// render writes a page whole, or a 500 when its template fails.
func (rd *renderer) render(w http.ResponseWriter, status int, name string, d *pageData) {
	t, ok := rd.pages[name]
	var buf bytes.Buffer
	err := fmt.Errorf("no page %q", name)
	if ok {
		err = t.ExecuteTemplate(&buf, "layout", d)
	}
	if err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

var funcs = template.FuncMap{
	"short": shortID,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"ago":   func(seconds int64) string { return (time.Duration(seconds) * time.Second).String() },
	"join":  func(s []string, sep string) string { return strings.Join(s, sep) },
	"level": func(l conditions.Level) string { return l.String() },
	"pretty": func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(b)
	},
	"ifp3": func(m *gossip.Message) string {
		if m == nil {
			return ""
		}
		b, err := gossip.RenderIFP3(m, nil)
		if err != nil {
			return "(cannot render in IFP-3 form: " + err.Error() + ")"
		}
		return string(b)
	},
	"pathesc": url.PathEscape, // a path segment (html/template escapes a query itself)
	"deref":   func(b *bool) bool { return b != nil && *b },
	"levels": func() []levelOption {
		return []levelOption{{"-1", "none"}, {"0", "0 (introduced)"}, {"1", "1 (signed)"}, {"2", "2 (verified)"}, {"3", "3 (bound)"}}
	},
	"temperatures": func() []string { return []string{conditions.Cool, conditions.Warm, conditions.Hot} },
	"field":        func(p *pageData, id string) fieldRef { return fieldRef{P: p, ID: id} },
	// invalid marks a form field that a refusal concerns, and ties the
	// refusal beside it to it.
	"invalid": func(p *pageData, id string) template.HTMLAttr {
		if p.FieldError(id) == "" {
			return ""
		}
		return template.HTMLAttr(`aria-invalid="true" aria-describedby="` + template.HTMLEscapeString(id) + `-error"`)
	},
	"whyRefused": whyRefused,
	"partText":   partText,
	"partTitle":  partTitle,
	"codes":      refusedCodes,
	"instant":    func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
}

// partText is a message part's content as a person reads it: text as
// it is, anything else as indented JSON.
func partText(content any) string {
	if s, ok := content.(string); ok {
		return s
	}
	b, err := json.MarshalIndent(content, "", "  ")
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(b)
}

// partTitle says what a part is, by the names ifaced gives them.
func partTitle(name string) string {
	switch name {
	case "result":
		return "The answer"
	case "error":
		return "The refusal"
	case "parameters":
		return "The request's parameters"
	case "capabilities":
		return "A signed view of capabilities"
	case "greeting":
		return "The greeting's proposal"
	case "context":
		return "The context granted"
	case "delivered":
		return "An acknowledgement: the peer says it admitted and recorded the message named"
	case "":
		return "A part"
	}
	return "Part " + name
}

// fieldRef is a form field of a page, for the "ferr" template.
type fieldRef struct {
	P  *pageData
	ID string
}

// levelOption is an authentication level in a form's choices.
type levelOption struct{ Value, Name string }

// shortID shortens a peer ID for a table: its start and end.
func shortID(id string) string {
	if len(id) <= 20 {
		return id
	}
	return id[:12] + "…" + id[len(id)-6:]
}

// labels names peers as the owner does: an alias, else the display name
// the peer gave.
type labels struct {
	peers   map[string]string // peer ID → display name ("" when none)
	aliases map[string]string // peer ID → alias
	byAlias map[string]string // alias → peer ID
	ids     []string          // known peer IDs, in the order the API lists them
}

// labels reads the peer cache and the alias book. A failure leaves peers
// shown by their IDs.
func (c *Console) labels(ctx context.Context) labels {
	l := labels{peers: map[string]string{}, aliases: map[string]string{}, byAlias: map[string]string{}}
	if ps, err := c.api.Peers(ctx); err == nil {
		for _, p := range ps {
			if _, dup := l.peers[p.PeerID]; !dup {
				l.ids = append(l.ids, p.PeerID)
			}
			l.peers[p.PeerID] = p.Display
		}
	}
	if c.aliases != nil {
		if all, err := c.aliases.All(); err == nil {
			for name, pid := range all {
				l.aliases[pid.String()] = name
				l.byAlias[name] = pid.String()
			}
		}
	}
	return l
}

// Name is how the owner calls a peer: "alias (display)", the alias, the
// display name, or "" when it has neither.
func (l labels) Name(id string) string {
	a, d := l.aliases[id], l.peers[id]
	switch {
	case a != "" && d != "" && a != d:
		return a + " (" + d + ")"
	case a != "":
		return a
	}
	return d
}

// Label is Name, or the shortened ID.
func (l labels) Label(id string) string {
	if n := l.Name(id); n != "" {
		return n
	}
	return shortID(id)
}

// Known lists the known peers for a form's choices.
func (l labels) Known() []string { return l.ids }

func containsCircuit(a string) bool { return strings.Contains(a, "/p2p-circuit") }

// publicAddr reports whether a multiaddr's IP is a global unicast one.
func publicAddr(a string) bool {
	ma, err := multiaddr.NewMultiaddr(a)
	if err != nil {
		return false
	}
	for _, code := range []int{multiaddr.P_IP4, multiaddr.P_IP6} {
		if v, err := ma.ValueForProtocol(code); err == nil {
			ip, err := netip.ParseAddr(v)
			return err == nil && ip.IsGlobalUnicast() && !ip.IsPrivate()
		}
	}
	return false
}
