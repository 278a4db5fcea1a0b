package negotiate

import (
	"errors"
	"fmt"
	"math"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaURL is the address schemas are compiled under. It is hierarchical
// so that relative references resolve to other addresses, which the
// loader then refuses; nothing is ever fetched (.invalid never resolves).
const schemaURL = schemaBase + "capability.json"

const schemaBase = "https://schema.ifaced.invalid/"

var errNoLoading = errors.New("schemas may not load anything from outside the document ($ref only within it)")

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%w: %s", errNoLoading, url)
}

// CompileSchema compiles a JSON Schema (draft 2020-12 unless it names
// another draft in $schema). It refuses external references: a schema
// from a peer must not make this daemon read files or the network.
func CompileSchema(schema any) (*jsonschema.Schema, error) {
	if err := checkValue(schema, 1); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	c.AssertFormat()
	if err := c.AddResource(schemaURL, schema); err != nil {
		return nil, fmt.Errorf("adding schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// checkSchema says why schema is not a JSON Schema this daemon compiles,
// one problem per failing keyword, located inside the schema
// (schemaCompileProblems); none when it compiles. Each reads
// "is not valid JSON Schema: properties.days.type: must be one of …".
func checkSchema(schema any) []schemaProblem {
	switch schema.(type) {
	case map[string]any, bool:
	default:
		return []schemaProblem{{Problem: fmt.Sprintf("must be a JSON Schema object (or true/false), got %T", schema)}}
	}
	if err := checkValue(schema, 1); err != nil {
		return []schemaProblem{{Problem: err.Error()}}
	}
	if _, err := CompileSchema(schema); err != nil {
		return schemaCompileProblems(err)
	}
	return nil
}

// checkValue bounds depth and rejects what has no JSON form.
func checkValue(v any, depth int) error {
	if depth > MaxSchemaDepth {
		return fmt.Errorf("nests deeper than %d levels", MaxSchemaDepth)
	}
	switch v := v.(type) {
	case nil, bool, string, int64, uint64, int, int32:
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%v has no JSON form", v)
		}
	case []any:
		for _, e := range v {
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range v {
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("holds a %T, which is not a JSON value", v)
	}
	return nil
}
