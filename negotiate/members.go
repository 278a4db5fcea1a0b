package negotiate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/ifaced/ifaced/conditions"
)

// Members a receiver does not model. IFP-2 asks a receiver to ignore the
// members it does not know, not to drop them: a peer's view may carry an
// extension this daemon has never heard of, and it still reaches the
// owner's console, the peer cache and anyone the view is shown to. So a
// view decoded from a peer (DecodeView, VerifyView) keeps them, as
// received, in Extra on the document and on each capability and in
// ConditionsExtra for its conditions object, and encoding the document
// writes them back. Nested objects this package models (price, relay,
// unmet entries, the signature) keep only what they model; the canonical
// bytes a view arrived as (VerifiedView.Canon) keep everything, and are
// what its signature is checked over.

// Decoding follows the caller's strictness. Under
// jsonv2.RejectUnknownMembers (LoadDocument, DecodeStrict: an owner's
// file, where a misspelt member would silently drop a condition) every
// member must be known, a condition's too. Otherwise (DecodeView, and
// encoding/json's Unmarshal, as the control API's client reads views)
// the members a type does not model are kept in Extra and
// ConditionsExtra, and Validate refuses a document that has any: an
// owner's document decoded leniently by mistake still cannot carry a
// misspelt condition into force.

// plainDocument and plainCapability have the fields of Document and
// Capability without their methods, so encoding them does not recurse.
type (
	plainDocument   Document
	plainCapability Capability
)

// encodeOptions encode a document as encoding/json does (the same
// members, so the same canonical form and the same signatures as before
// documents had methods), through the faster go-json-experiment engine,
// with capabilities encoded by encodeCapabilityTo. encoding/json would
// check and compact the bytes of every MarshalJSON again, which more than
// doubles the cost of canonicalizing a view.
var (
	encodeOptions = jsonv2.JoinOptions(capabilityOptions,
		jsonv2.WithMarshalers(jsonv2.MarshalToFunc(encodeCapabilityTo)))
	capabilityOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.Deterministic(true))
)

// encodeDocument is the JSON of d with the members it does not model.
func encodeDocument(d *Document) ([]byte, error) {
	b, err := jsonv2.Marshal((*plainDocument)(d), encodeOptions)
	if err != nil || len(d.Extra) == 0 {
		return b, err
	}
	return withMembers(b, d.Extra, documentNames())
}

// MarshalJSON writes the document with the members it does not model.
func (d Document) MarshalJSON() ([]byte, error) { return encodeDocument(&d) }

// MarshalJSON writes the capability with the members it does not model,
// its own and its conditions'.
func (c Capability) MarshalJSON() ([]byte, error) { return encodeCapability(&c) }

func encodeCapabilityTo(enc *jsontext.Encoder, c *Capability) error {
	if len(c.Extra) == 0 && len(c.ConditionsExtra) == 0 {
		return jsonv2.MarshalEncode(enc, (*plainCapability)(c))
	}
	b, err := encodeCapability(c)
	if err != nil {
		return err
	}
	return enc.WriteValue(b)
}

// documentIn and capabilityIn are a document and a capability as decoded
// leniently: the modeled members, the conditions object as it came, and
// the rest.
type (
	documentIn struct {
		plainDocument
		Extra map[string]jsontext.Value `json:",embed"`
	}
	capabilityIn struct {
		plainCapability
		Conditions jsontext.Value            `json:"conditions"`
		Extra      map[string]jsontext.Value `json:",embed"`
	}
)

// strict reports whether dec refuses unknown members.
func strict(dec *jsontext.Decoder) bool {
	v, _ := jsonv2.GetOption(dec.Options(), jsonv2.RejectUnknownMembers)
	return v
}

// UnmarshalJSONFrom decodes a document (see the rules above).
func (d *Document) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if strict(dec) {
		var p plainDocument
		if err := jsonv2.UnmarshalDecode(dec, &p); err != nil {
			return err
		}
		*d = Document(p)
		return nil
	}
	var in documentIn
	if err := jsonv2.UnmarshalDecode(dec, &in); err != nil {
		return err
	}
	*d = Document(in.plainDocument)
	d.Extra = in.Extra
	return nil
}

// UnmarshalJSON decodes a document for encoding/json, keeping the members
// it does not model.
func (d *Document) UnmarshalJSON(b []byte) error { return jsonv2.Unmarshal(b, d) }

// UnmarshalJSONFrom decodes a capability (see the rules above). Leniently,
// the conditions object is read by package conditions (persona as a
// string or a list) once the members it does not know are set aside: in
// an owner's file an unknown condition is an error, because ignoring it
// would lift a condition the owner meant; in a peer's view it is the
// peer's own business, which the peer decides.
func (c *Capability) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if strict(dec) {
		var p plainCapability
		if err := jsonv2.UnmarshalDecode(dec, &p); err != nil {
			return err
		}
		*c = Capability(p)
		return nil
	}
	var in capabilityIn
	if err := jsonv2.UnmarshalDecode(dec, &in); err != nil {
		return err
	}
	*c = Capability(in.plainCapability)
	c.Extra = in.Extra
	if len(in.Conditions) == 0 || in.Conditions.Kind() == 'n' {
		return nil
	}
	known, extra, err := splitMembers(in.Conditions, conditionNames())
	if err != nil {
		return fmt.Errorf("conditions: %w", err)
	}
	var conds conditions.Conditions
	if err := conds.UnmarshalJSON(known); err != nil {
		return fmt.Errorf("conditions: %w", err)
	}
	c.Conditions, c.ConditionsExtra = &conds, extra
	return nil
}

// UnmarshalJSON decodes a capability for encoding/json, keeping the
// members it does not model.
func (c *Capability) UnmarshalJSON(b []byte) error { return jsonv2.Unmarshal(b, c) }

// capabilityOut replaces a capability's conditions with the conditions
// object and its unmodeled members, encoded.
type capabilityOut struct {
	plainCapability
	Conditions jsontext.Value `json:"conditions,omitempty"`
}

func encodeCapability(c *Capability) ([]byte, error) {
	var b []byte
	var err error
	if len(c.ConditionsExtra) == 0 {
		b, err = jsonv2.Marshal((*plainCapability)(c), capabilityOptions)
	} else {
		conds, cerr := json.Marshal(c.Conds())
		if cerr != nil {
			return nil, cerr
		}
		if conds, cerr = withMembers(conds, c.ConditionsExtra, conditionNames()); cerr != nil {
			return nil, fmt.Errorf("capability %q: conditions: %w", c.Name, cerr)
		}
		b, err = jsonv2.Marshal(&capabilityOut{plainCapability(*c), conds}, capabilityOptions)
	}
	if err != nil || len(c.Extra) == 0 {
		return b, err
	}
	if b, err = withMembers(b, c.Extra, capabilityNames()); err != nil {
		return nil, fmt.Errorf("capability %q: %w", c.Name, err)
	}
	return b, nil
}

// withMembers adds extra members to obj, a JSON object, in name order.
// A name the type models (known) is refused: the object would hold it
// twice, and readers would disagree about which one counts.
func withMembers(obj []byte, extra map[string]jsontext.Value, known map[string]bool) ([]byte, error) {
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("adding unmodeled members: not a JSON object")
	}
	names := make([]string, 0, len(extra))
	for name := range extra {
		if known[name] {
			return nil, fmt.Errorf("unmodeled member %q is a modeled one", name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	out := bytes.Clone(obj[:len(obj)-1])
	for _, name := range names {
		v := extra[name]
		if !v.IsValid() {
			return nil, fmt.Errorf("unmodeled member %q is not valid JSON", name)
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		var err error
		if out, err = jsontext.AppendQuote(out, name); err != nil {
			return nil, fmt.Errorf("unmodeled member name %q: %w", name, err)
		}
		out = append(out, ':')
		out = append(out, v...)
	}
	return append(out, '}'), nil
}

// The member names each type models, from its JSON tags.
var (
	documentNames   = sync.OnceValue(func() map[string]bool { return jsonNames(reflect.TypeFor[Document]()) })
	capabilityNames = sync.OnceValue(func() map[string]bool { return jsonNames(reflect.TypeFor[Capability]()) })
	conditionNames  = sync.OnceValue(func() map[string]bool { return jsonNames(reflect.TypeFor[conditions.Conditions]()) })
)

func jsonNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names[name] = true
		}
	}
	return names
}

// splitMembers separates the members of a JSON object that known names
// from the rest. known comes back as an object holding only those.
func splitMembers(obj jsontext.Value, known map[string]bool) (jsontext.Value, map[string]jsontext.Value, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, nil, err
	}
	if tok.Kind() != '{' {
		return nil, nil, fmt.Errorf("must be a JSON object, got %s", kindName(tok.Kind()))
	}
	kept := jsontext.Value{'{'}
	var extra map[string]jsontext.Value
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, err
		}
		name := tok.String() // before the next read, which reuses the token's buffer
		v, err := dec.ReadValue()
		if err != nil {
			return nil, nil, err
		}
		if known[name] {
			if len(kept) > 1 {
				kept = append(kept, ',')
			}
			kept, _ = jsontext.AppendQuote(kept, name)
			kept = append(kept, ':')
			kept = append(kept, v...)
			continue
		}
		if extra == nil {
			extra = map[string]jsontext.Value{}
		}
		extra[name] = v.Clone()
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, err
	}
	return append(kept, '}'), extra, nil
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "something else"
}
