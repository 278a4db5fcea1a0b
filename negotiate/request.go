package negotiate

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Capability requests. A request names one capability and carries its
// parameters; the owner decides it on its own facts. The decision order is
// fixed so that nothing leaks: a capability the requester may not know
// about (hidden by advertise = "when-eligible", or absent under the active
// persona, or not in the document at all) is answered identically as
// unknown; only a capability the requester can see may say which
// conditions are unmet; only then are parameters checked.

// ErrUnknownCapability: no such capability for this requester. The error
// text is the same whether the capability does not exist or is hidden.
var ErrUnknownCapability = errors.New("unknown capability")

// ErrInvalidParams: the parameters do not satisfy the capability's schema.
var ErrInvalidParams = errors.New("parameters do not match the capability's schema")

// ErrInvalidOutput: the agent's result does not satisfy output_schema.
var ErrInvalidOutput = errors.New("result does not match the capability's output_schema")

// Decide finds the capability name for a requester with facts f and checks
// its conditions. retryHint is the wait suggested when the capability is
// busy. The error wraps ErrUnknownCapability, or the conditions' error
// (conditions.ErrNotMet, conditions.ErrBusy) carrying the unmet list.
func (d *Document) Decide(name string, f conditions.Facts, order *conditions.TierOrder, retryHint time.Duration) (*Capability, error) {
	c, ok := d.Capability(name)
	if !ok {
		return nil, unknown(name)
	}
	dec := conditions.Evaluate(c.Conds(), f, order, retryHint)
	if dec.Absent() || (c.Hidden() && !dec.Eligible()) {
		return nil, unknown(name)
	}
	if !dec.Eligible() {
		// How busy a capability is concerns only those who may use it.
		dec.Unmet = slices.DeleteFunc(dec.Unmet, func(u conditions.Unmet) bool { return u.Condition == conditions.CondMaxConcurrent })
		dec.RetryAfter = 0
	}
	if err := dec.Error(); err != nil {
		return c, fmt.Errorf("capability %q: %w", name, err)
	}
	return c, nil
}

func unknown(name string) error {
	return fmt.Errorf("%w %q: this agent offers you no capability by that name", ErrUnknownCapability, name)
}

// Schemas holds a document's compiled parameter and output schemas. It is
// built once per document seq, because compiling costs far more than
// validating.
type Schemas struct {
	seq    uint64
	mu     sync.Mutex
	params map[string]*jsonschema.Schema
	output map[string]*jsonschema.Schema
}

// NewSchemas compiles every schema of d. d must have validated, so every
// schema compiles.
func NewSchemas(d *Document) (*Schemas, error) {
	s := &Schemas{seq: d.Seq, params: map[string]*jsonschema.Schema{}, output: map[string]*jsonschema.Schema{}}
	for i := range d.Capabilities {
		c := &d.Capabilities[i]
		if c.Parameters != nil {
			sch, err := CompileSchema(c.Parameters)
			if err != nil {
				return nil, fmt.Errorf("capability %q parameters: %w", c.Name, err)
			}
			s.params[c.Name] = sch
		}
		if c.OutputSchema != nil {
			sch, err := CompileSchema(c.OutputSchema)
			if err != nil {
				return nil, fmt.Errorf("capability %q output_schema: %w", c.Name, err)
			}
			s.output[c.Name] = sch
		}
	}
	return s, nil
}

// Seq is the document seq the schemas were compiled from.
func (s *Schemas) Seq() uint64 { return s.seq }

// CheckParams validates a request's parameters (a JSON value; nil means
// none) against the capability's parameters schema. The error names each
// failing location in the parameters and what was expected there.
func (s *Schemas) CheckParams(name string, params any) error {
	return s.check(s.params[name], params, ErrInvalidParams)
}

// CheckOutput validates an agent's result against output_schema.
func (s *Schemas) CheckOutput(name string, result any) error {
	return s.check(s.output[name], result, ErrInvalidOutput)
}

func (s *Schemas) check(sch *jsonschema.Schema, v any, sentinel error) error {
	if sch == nil {
		return nil
	}
	if v == nil {
		v = map[string]any{} // no parameters is an empty object
	}
	if err := checkValue(v, 1); err != nil {
		return fmt.Errorf("%w: %v", sentinel, err)
	}
	err := sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return fmt.Errorf("%w: %s", sentinel, describeValidation(ve))
	}
	return fmt.Errorf("%w: %v", sentinel, err)
}

var printer = message.NewPrinter(language.English)
