package negotiate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/ifaced/ifaced/conditions"
	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Format is the syntax of a document file.
type Format int

// Document file syntaxes.
const (
	FormatJSON Format = iota
	FormatTOML
)

// FormatOf picks the format from a file name: .toml is TOML, anything
// else JSON.
func FormatOf(name string) Format {
	if strings.EqualFold(filepath.Ext(name), ".toml") {
		return FormatTOML
	}
	return FormatJSON
}

func (f Format) String() string {
	if f == FormatTOML {
		return "TOML"
	}
	return "JSON"
}

// MaxSourceSize bounds a document file.
const MaxSourceSize = 4 << 20

// LoadDocument reads an owner's capability document from JSON or TOML and
// validates it under order. It is strict, because a typo in an owner's
// file ("desciption", "min_disclosur") would otherwise drop a condition in
// silence: unknown members, duplicate keys and wrong types are errors.
// Every error is a *FieldError carrying the source line when one is known.
//
// TOML is read as syntax only: it is turned into the equivalent JSON and
// decoded by the same rules, so the two formats cannot drift apart.
func LoadDocument(src []byte, format Format, order *conditions.TierOrder) (*Document, error) {
	var d Document
	if err := DecodeStrict(src, format, "", &d); err != nil {
		return nil, err
	}
	if err := d.Validate(order); err != nil {
		return nil, Locate(err, src, format, "")
	}
	return &d, nil
}

// Shape is what a capability file holds. Owners meet capabilities in
// several forms — one in the tutorial's cap.json (docs/tutorials/two-daemons.md), a list, a whole document
// (what `caps` --json prints), the [[capabilities]] tables of a config
// (examples/agent/capabilities.toml) — so every one of them is read, in
// JSON or TOML, and the reader is told which it was.
type Shape int

// Capability file shapes.
const (
	ShapeCapability Shape = iota + 1 // one capability object
	ShapeList                        // a JSON array of capability objects
	ShapeDocument                    // an IFP-7 capability document (ifp, agent_id, capabilities, …)
	ShapeTables                      // [[capabilities]] tables as in config.toml ({"capabilities": […]} in JSON), without the rest of a document
)

func (s Shape) String() string {
	switch s {
	case ShapeCapability:
		return "one capability"
	case ShapeList:
		return "a list of capabilities"
	case ShapeDocument:
		return "a capability document"
	case ShapeTables:
		return "[[capabilities]] tables"
	}
	return "nothing known"
}

// CapabilityFile is what LoadCapabilities read from a file.
type CapabilityFile struct {
	Shape        Shape
	Format       Format
	Capabilities []Capability
	// Document is the whole document of a ShapeDocument file, validated
	// as one; nil otherwise.
	Document *Document
	// AGUI is a [agui] table beside [[capabilities]] tables (or the
	// document's agui member).
	AGUI *AGUICapabilities
}

// Describe says what was read: "one capability (JSON)", "3 capabilities
// in [[capabilities]] tables (TOML)".
func (f *CapabilityFile) Describe() string {
	if f.Shape == ShapeCapability {
		return fmt.Sprintf("one capability (%s)", f.Format)
	}
	n := fmt.Sprintf("%d capabilities", len(f.Capabilities))
	if len(f.Capabilities) == 1 {
		n = "1 capability"
	}
	switch f.Shape {
	case ShapeList:
		return fmt.Sprintf("a list of %s (%s)", n, f.Format)
	case ShapeDocument:
		return fmt.Sprintf("a capability document with %s (%s)", n, f.Format)
	}
	return fmt.Sprintf("%s in [[capabilities]] tables (%s)", n, f.Format)
}

// Path is where capability i is in the file, as errors name fields: ""
// for a single capability, "[i]" in a list, "capabilities[i]" otherwise.
func (f *CapabilityFile) Path(i int) string {
	switch f.Shape {
	case ShapeCapability:
		return ""
	case ShapeList:
		return fmt.Sprintf("[%d]", i)
	}
	return fmt.Sprintf("capabilities[%d]", i)
}

// tablesFile is the JSON form of [[capabilities]] tables.
type tablesFile struct {
	Capabilities []Capability      `json:"capabilities"`
	AGUI         *AGUICapabilities `json:"agui,omitempty"`
}

// LoadCapabilities reads capabilities from a file of any Shape, in JSON or
// TOML, by the strict rules of LoadDocument, and validates them under
// order as a document holding them would be. Every misspelt member (of a
// capability, a condition, a document) is reported at once with the
// member meant. Errors are *FieldErrors naming fields as they are in the
// file (Path) with their lines; once the shape is known, the file comes
// back with the error, its Shape and Format set, so that a caller can say
// what it read. A config.toml (with its version key) is not read here:
// package node loads configs.
func LoadCapabilities(src []byte, format Format, order *conditions.TierOrder) (*CapabilityFile, error) {
	f, doc, err := decodeCapabilities(src, format)
	if err != nil {
		return f, err
	}
	if err := doc.Validate(order); err != nil {
		for _, e := range Errors(err) {
			var fe *FieldError
			if errors.As(e, &fe) {
				fe.Field = f.fileField(fe.Field)
			}
		}
		return f, sortedByLine(Locate(err, src, format, ""))
	}
	return f, nil
}

// DecodeCapabilities reads a capability file as LoadCapabilities does but
// does not validate what it read: for a caller that has it validated
// where the rules in force are (`caps add`: the daemon, under its tiers).
func DecodeCapabilities(src []byte, format Format) (*CapabilityFile, error) {
	f, _, err := decodeCapabilities(src, format)
	return f, err
}

// decodeCapabilities reads the file, and the document that holds what it
// read (the file's own for a document), for Validate.
func decodeCapabilities(src []byte, format Format) (*CapabilityFile, *Document, error) {
	var tree any
	if err := DecodeStrict(src, format, "", &tree); err != nil {
		return nil, nil, err
	}
	f := &CapabilityFile{Format: format, Shape: shapeOf(tree)}
	var misspelt []error
	switch f.Shape {
	case ShapeCapability:
		misspelt = MisspeltMembers("", tree)
	case ShapeList:
		for i, c := range tree.([]any) {
			misspelt = append(misspelt, MisspeltMembers(fmt.Sprintf("[%d]", i), c)...)
		}
	case ShapeDocument:
		misspelt = MisspeltDocumentMembers(tree)
	case ShapeTables:
		for _, key := range slices.Sorted(maps.Keys(tree.(map[string]any))) {
			if key != "capabilities" && key != "agui" {
				misspelt = append(misspelt, unknownMember(key, key, "table beside [[capabilities]]", []string{"capabilities", "agui"}))
			}
		}
		if list, ok := tree.(map[string]any)["capabilities"].([]any); ok {
			for i, c := range list {
				misspelt = append(misspelt, MisspeltMembers(fmt.Sprintf("capabilities[%d]", i), c)...)
			}
		}
	default:
		return nil, nil, &FieldError{Field: "(file)", Line: 1, Problem: fmt.Sprintf("is %s; want a capability object, a list of them, a capability document, or [[capabilities]] tables", jsonKindOf(tree))}
	}
	if len(misspelt) > 0 {
		return f, nil, sortedByLine(Locate(errors.Join(misspelt...), src, format, ""))
	}
	doc := &Document{IFP: Version, AgentID: "(this file)"}
	var err error
	switch f.Shape {
	case ShapeCapability:
		var c Capability
		err = DecodeValue(tree, &c)
		doc.Capabilities = []Capability{c}
	case ShapeList:
		err = DecodeValue(tree, &doc.Capabilities)
	case ShapeTables:
		var t tablesFile
		err = DecodeValue(tree, &t)
		doc.Capabilities, doc.AGUI = t.Capabilities, t.AGUI
	case ShapeDocument:
		err = DecodeValue(tree, doc)
		f.Document = doc
	}
	if err != nil {
		return f, nil, Locate(err, src, format, "")
	}
	f.Capabilities, f.AGUI = doc.Capabilities, doc.AGUI
	return f, doc, nil
}

// fileField turns a field of the document the capabilities were checked
// in ("capabilities[2].name") into its path in the file.
func (f *CapabilityFile) fileField(field string) string {
	if f.Shape == ShapeDocument || f.Shape == ShapeTables {
		return field
	}
	rest, ok := strings.CutPrefix(field, "capabilities[")
	if !ok {
		return field
	}
	num, after, ok := strings.Cut(rest, "]")
	i, err := strconv.Atoi(num)
	if !ok || err != nil {
		return field
	}
	return joinPath(f.Path(i), strings.TrimPrefix(after, "."))
}

// shapeOf tells the shape of a decoded file: an array is a list; an
// object with a member only documents have is a document; an object with
// capabilities (and nothing of a single capability) is tables; any other
// object with a capability's members is one capability. An object with
// none of these, such as a misspelt {"capabilites": […]}, is read as
// tables, so that the misspelling is named.
func shapeOf(tree any) Shape {
	switch t := tree.(type) {
	case []any:
		return ShapeList
	case map[string]any:
		for key := range t {
			if documentNames()[key] && key != "capabilities" && key != "agui" {
				return ShapeDocument
			}
		}
		if _, ok := t["capabilities"]; ok {
			return ShapeTables
		}
		for key := range t {
			if capabilityNames()[key] || conditionNames()[key] {
				return ShapeCapability
			}
		}
		return ShapeTables
	}
	return 0
}

func jsonKindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	}
	return "something else"
}

// sortedByLine orders joined problems by their lines.
func sortedByLine(err error) error {
	errs := Errors(err)
	slices.SortStableFunc(errs, func(a, b error) int { return lineOfError(a) - lineOfError(b) })
	return errors.Join(errs...)
}

func lineOfError(err error) int {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Line
	}
	return 0
}

// DecodeStrict decodes src (JSON, or TOML read as JSON) into v with the
// strict rules of LoadDocument. prefix is the path of src's root inside a
// larger file, for line numbers; errors name fields by their JSON path.
func DecodeStrict(src []byte, format Format, prefix string, v any) error {
	if len(src) > MaxSourceSize {
		return &FieldError{Field: "(file)", Problem: fmt.Sprintf("is %d bytes, at most %d", len(src), MaxSourceSize)}
	}
	js := src
	if format == FormatTOML {
		var tree map[string]any
		if err := toml.Unmarshal(src, &tree); err != nil {
			var de *toml.DecodeError
			if errors.As(err, &de) {
				line, _ := de.Position()
				return &FieldError{Field: strings.Join(de.Key(), "."), Problem: de.Error(), Line: line}
			}
			return &FieldError{Field: "(file)", Problem: err.Error()}
		}
		var err error
		if js, err = json.Marshal(tree); err != nil {
			return &FieldError{Field: "(file)", Problem: fmt.Sprintf("has a value with no JSON form: %v", err)}
		}
	}
	fe := decodeJSONStrict(js, v)
	if fe == nil {
		return nil
	}
	if fe.offset >= 0 && format == FormatJSON {
		fe.Line = lineAt(src, fe.offset)
	}
	return Locate(fe.FieldError, src, format, prefix)
}

// DecodeValue decodes an already parsed value (such as part of a TOML
// file) into v by the strict rules of DecodeStrict. Errors carry field
// paths relative to tree but no lines; see Locate.
func DecodeValue(tree any, v any) error {
	js, err := json.Marshal(tree)
	if err != nil {
		return &FieldError{Field: "(value)", Problem: fmt.Sprintf("has no JSON form: %v", err)}
	}
	if fe := decodeJSONStrict(js, v); fe != nil {
		return fe.FieldError
	}
	return nil
}

type decodeFailure struct {
	*FieldError
	offset int // byte offset of a syntax error, or -1
}

func decodeJSONStrict(js []byte, v any) *decodeFailure {
	err := jsonv2.Unmarshal(js, v, jsonv2.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	fe := &decodeFailure{&FieldError{Field: "(document)", Problem: err.Error()}, -1}
	var se *jsonv2.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &se):
		fe.Field = pointerToField(string(se.JSONPointer))
		fe.Problem = semanticProblem(se)
		var cfe *conditions.FieldError
		if errors.As(se.Err, &cfe) {
			// The conditions decoder names the field inside the object.
			fe.Field, fe.Problem = joinPath(fe.Field, cfe.Field), cfe.Problem
		}
	case errors.As(err, &syn):
		fe.Field = pointerToField(string(syn.JSONPointer))
		fe.Problem = syn.Err.Error()
		fe.offset = int(syn.ByteOffset)
	}
	if fe.Field == "" {
		fe.Field = "(document)"
	}
	return fe
}

func semanticProblem(se *jsonv2.SemanticError) string {
	if errors.Is(se.Err, jsonv2.ErrUnknownName) {
		return "is not a known field (check its spelling)"
	}
	if errors.Is(se.Err, conditions.ErrInvalid) {
		return se.Err.Error()
	}
	if se.GoType != nil {
		kind := "this value"
		if se.JSONKind != 0 {
			kind = kindName(se.JSONKind)
		}
		msg := fmt.Sprintf("cannot be %s here (want %s)", kind, jsonWords(se.GoType))
		if se.Err != nil {
			msg += ": " + se.Err.Error()
		}
		return msg
	}
	return se.Error()
}

// pointerToField turns "/capabilities/3/name" into "capabilities[3].name".
func pointerToField(ptr string) string {
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

func joinPath(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case strings.HasPrefix(field, "["):
		return prefix + field
	default:
		return prefix + "." + field
	}
}

// Locate adds source lines to the *FieldErrors in err (a single error or
// an errors.Join of them); prefix is the path of the document's root in
// src.
func Locate(err error, src []byte, format Format, prefix string) error {
	ix := indexLines(src, format)
	for _, e := range Errors(err) {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Line == 0 {
			fe.Line = ix.lineOf(joinPath(prefix, fe.Field))
		}
	}
	return err
}

// lineIndex maps a field path ("capabilities[3].conditions") to the line
// where it starts in the source.
type lineIndex map[string]int

// lineOf returns the line of path, or of its closest enclosing field.
func (ix lineIndex) lineOf(path string) int {
	for path != "" {
		if l, ok := ix[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

func indexLines(src []byte, format Format) lineIndex {
	if format == FormatTOML {
		return indexTOML(src)
	}
	return indexJSON(src)
}

func lineAt(src []byte, offset int) int {
	if offset > len(src) {
		offset = len(src)
	}
	return bytes.Count(src[:offset], []byte("\n")) + 1
}

// indexJSON walks the token stream, recording where each member and
// element starts.
func indexJSON(src []byte) lineIndex {
	ix := lineIndex{}
	dec := json.NewDecoder(bytes.NewReader(src))
	var walk func(path string, depth int) error
	walk = func(path string, depth int) error {
		if depth > 64 {
			return errors.New("too deep")
		}
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if path != "" {
			if _, ok := ix[path]; !ok {
				ix[path] = lineAt(src, int(start)+len(leadingSpace(src[start:])))
			}
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				kstart := dec.InputOffset()
				k, err := dec.Token()
				if err != nil {
					return err
				}
				child := joinPath(path, fmt.Sprint(k))
				ix[child] = lineAt(src, int(kstart)+len(leadingSpace(src[kstart:])))
				if err := walk(child, depth+1); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		return err
	}
	if err := walk("", 0); err != nil && !errors.Is(err, io.EOF) {
		return ix // partial index: still useful for what came before the error
	}
	return ix
}

func leadingSpace(b []byte) []byte {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r' || b[i] == ',' || b[i] == ':') {
		i++
	}
	return b[:i]
}

// indexTOML records the line of every table header and key, resolving
// array-of-tables headers ([[capabilities]]) to indexed paths.
func indexTOML(src []byte) lineIndex {
	ix := lineIndex{}
	arrays := map[string]int{} // array-table path -> index of its last element
	resolve := func(keys []string) string {
		path := ""
		for _, k := range keys {
			path = joinPath(path, k)
			if n, ok := arrays[path]; ok {
				path = fmt.Sprintf("%s[%d]", path, n)
			}
		}
		return path
	}
	var p unstable.Parser
	p.Reset(src)
	current := ""
	for p.NextExpression() {
		e := p.Expression()
		keys := keyParts(e)
		line := 0
		if k := e.Key(); k.Next() {
			line = p.Shape(k.Node().Raw).Start.Line
		}
		switch e.Kind {
		case unstable.Table:
			current = resolve(keys)
			ix[current] = line
		case unstable.ArrayTable:
			base := resolve(keys[:len(keys)-1])
			name := joinPath(base, keys[len(keys)-1])
			n, seen := arrays[name]
			if seen {
				n++
			}
			arrays[name] = n
			current = fmt.Sprintf("%s[%d]", name, n)
			ix[current] = line
			if _, ok := ix[name]; !ok {
				ix[name] = line
			}
		case unstable.KeyValue:
			path := current
			for _, k := range keys {
				path = joinPath(path, k)
			}
			ix[path] = line
		}
	}
	return ix
}

func keyParts(n *unstable.Node) []string {
	var keys []string
	it := n.Key()
	for it.Next() {
		keys = append(keys, string(it.Node().Data))
	}
	return keys
}
