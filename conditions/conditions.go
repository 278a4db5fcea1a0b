package conditions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// Conditions are the IFP-7 conditions object of one capability (plus
// ifaced's additions: persona, peers, max_concurrent). The zero value has no
// conditions: anyone may use the capability.
type Conditions struct {
	MinDisclosure string   `json:"min_disclosure,omitempty" toml:"min_disclosure,omitempty"`
	MinAuthLevel  *Level   `json:"min_auth_level,omitempty" toml:"min_auth_level,omitempty"` // nil: no requirement; 0 is a real requirement
	Temperature   string   `json:"temperature,omitempty" toml:"temperature,omitempty"`       // minimum temperature
	Persona       []string `json:"persona,omitempty" toml:"persona,omitempty"`               // capability exists only under these owner personas
	Peers         []string `json:"peers,omitempty" toml:"peers,omitempty"`                   // allow list of peer IDs / agent ids
	MaxConcurrent int      `json:"max_concurrent,omitempty" toml:"max_concurrent,omitempty"` // 0 = unlimited
}

// wireConditions is Conditions as decoded from JSON: persona is held raw
// because IFP-12 writes it as a single string where ifaced writes an array.
type wireConditions struct {
	MinDisclosure string          `json:"min_disclosure,omitempty"`
	MinAuthLevel  *Level          `json:"min_auth_level,omitempty"`
	Temperature   string          `json:"temperature,omitempty"`
	Persona       json.RawMessage `json:"persona,omitempty"`
	Peers         []string        `json:"peers,omitempty"`
	MaxConcurrent int             `json:"max_concurrent,omitempty"`
}

// plainConditions has Conditions' fields and tags but not its methods, so
// encoding it does not recurse into MarshalJSON.
type plainConditions Conditions

// MarshalJSON writes the conditions object with persona always as an array.
// Zero-valued fields are omitted, except that a min_auth_level of 0 is kept:
// it is a requirement (hold an introduction token), not the absence of one.
func (c Conditions) MarshalJSON() ([]byte, error) {
	return json.Marshal(plainConditions(c))
}

// UnmarshalJSON reads a conditions object. persona may be a string (as
// IFP-12 writes it) or an array of strings. A field this package does not
// know is an error naming it: ignoring it would silently lift a condition the
// owner meant to impose. Empty arrays decode as nil, so that a decoded value
// re-encodes to an equal one.
func (c *Conditions) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil // the encoding/json convention: null leaves the value alone
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireConditions
	if err := dec.Decode(&w); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: unexpected data after the conditions object", ErrInvalid)
	}
	persona, err := decodePersona(w.Persona)
	if err != nil {
		return err
	}
	*c = Conditions{
		MinDisclosure: w.MinDisclosure,
		MinAuthLevel:  w.MinAuthLevel,
		Temperature:   w.Temperature,
		Persona:       persona,
		Peers:         nilIfEmpty(w.Peers),
		MaxConcurrent: w.MaxConcurrent,
	}
	return nil
}

// knownFields lists the fields of a conditions object, for error messages.
const knownFields = "min_disclosure, min_auth_level, temperature, persona, peers, max_concurrent"

// decodeError restates encoding/json's errors in terms of the conditions
// object, naming the field, so an owner can find the line to fix.
func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		switch {
		case typeErr.Field == "":
			return fmt.Errorf("%w: a conditions object must be a JSON object, got a JSON %s", ErrInvalid, typeErr.Value)
		case typeErr.Type.Kind() == reflect.String && typeErr.Field == string(CondPeers):
			// encoding/json names the array, not the element.
			return fieldErr(typeErr.Field, "must be an array of strings, got an array holding a JSON %s", typeErr.Value)
		}
		want := "a string"
		switch typeErr.Type.Kind() {
		case reflect.Int:
			want = "an integer"
		case reflect.Slice:
			want = "an array of strings"
		}
		return fieldErr(typeErr.Field, "must be %s, got a JSON %s", want, typeErr.Value)
	}
	if rest, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, uerr := strconv.Unquote(rest)
		if uerr != nil {
			name = rest
		}
		return fieldErr(name, "is not a known condition (known: %s); refusing it rather than ignoring a condition", knownFields)
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

func decodePersona(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fieldErr("persona", "%v", err) // unreachable: the decoder already checked the JSON
		}
		return []string{s}, nil
	case '[':
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			got := "something else"
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) {
				got = "a JSON " + typeErr.Value
			}
			return nil, fieldErr("persona", "must be a string or an array of strings, got an array holding %s", got)
		}
		return nilIfEmpty(list), nil
	}
	return nil, fieldErr("persona", "must be a string or an array of strings, got %s", jsonKind(raw[0]))
}

func jsonKind(first byte) string {
	switch first {
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// IsZero reports whether c imposes no condition at all.
func (c Conditions) IsZero() bool {
	return c.MinDisclosure == "" && c.MinAuthLevel == nil && c.Temperature == "" &&
		len(c.Persona) == 0 && len(c.Peers) == 0 && c.MaxConcurrent == 0
}

// Validate checks c against the owner's tier order (nil means the standard
// tiers). It reports every problem, joined; each is a [*FieldError] naming
// its field, so errors.Is(err, ErrInvalid) holds.
func (c Conditions) Validate(order *TierOrder) error {
	order = order.orDefault()
	var errs []error
	if c.MinDisclosure != "" && !order.Known(c.MinDisclosure) {
		errs = append(errs, fieldErr(string(CondMinDisclosure), "%q is not a known tier (known: %s)", c.MinDisclosure, joinTiers(order)))
	}
	if c.MinAuthLevel != nil && !c.MinAuthLevel.Valid() {
		errs = append(errs, fieldErr(string(CondMinAuthLevel), "%d is not an authentication level (0 introduced, 1 signed, 2 verified, 3 bound)", int(*c.MinAuthLevel)))
	}
	if c.Temperature != "" {
		if _, ok := TemperatureRank(c.Temperature); !ok {
			errs = append(errs, fieldErr(string(CondTemperature), "%q is not a temperature (cool, warm, hot)", c.Temperature))
		}
	}
	errs = append(errs, validateList(string(CondPersona), c.Persona)...)
	errs = append(errs, validateList(string(CondPeers), c.Peers)...)
	if c.MaxConcurrent < 0 {
		errs = append(errs, fieldErr(string(CondMaxConcurrent), "%d is negative (0 means unlimited)", c.MaxConcurrent))
	}
	return errors.Join(errs...)
}

// validateList checks that a list has no empty and no repeated entries. A
// repeat is harmless to evaluation but almost always a typo for another name.
func validateList(field string, list []string) []error {
	var errs []error
	seen := make(map[string]int, len(list))
	for i, s := range list {
		name := fmt.Sprintf("%s[%d]", field, i)
		if s == "" {
			errs = append(errs, fieldErr(name, "is empty"))
			continue
		}
		if j, dup := seen[s]; dup {
			errs = append(errs, fieldErr(name, "%q repeats %s[%d]", s, field, j))
			continue
		}
		seen[s] = i
	}
	return errs
}

func joinTiers(o *TierOrder) string {
	var b bytes.Buffer
	for i, t := range o.orDefault().tiers {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t)
	}
	return b.String()
}
