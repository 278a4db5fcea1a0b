package conditions

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Check is one condition of a capability, evaluated: what it required,
// what the requester had, and whether that met it. [Evaluate] reports only
// the conditions that failed, phrased for the requester; [Explain] reports
// every condition a capability sets, for whoever must answer why a
// request was decided as it was (the owner's audit log). An unmet Check
// carries exactly what the corresponding [Unmet] says.
type Check struct {
	Condition Condition `json:"condition"`
	Met       bool      `json:"met"`
	Required  string    `json:"required"`              // e.g. "professional", "2 (verified)", "fewer than 4 running"
	Have      string    `json:"have"`                  // e.g. "personal", "1 (signed)", "0 running"
	HowToMeet string    `json:"how_to_meet,omitempty"` // an unmet condition's advice, as Evaluate gives it
}

// Explain evaluates c on f under order (nil means the standard tiers) as
// [Evaluate] does, and returns one Check for each condition c sets, met or
// not, in the order of the Condition constants; a condition c does not set
// is not listed. Its unmet Checks are exactly Evaluate's Unmet, so the two
// never disagree about a decision; the met ones say what was required and
// what the requester had. Like Evaluate it never panics and fails closed.
//
// The allow list is named, as in Evaluate, only as "an allow-listed peer":
// a Check is for the owner's records, but it says what decided, not whom
// the owner chose.
func Explain(c Conditions, f Facts, order *TierOrder, retryHint time.Duration) []Check {
	order = order.orDefault()
	d := Evaluate(c, f, order, retryHint)
	var out []Check
	add := func(cond Condition, required, have string) {
		if i := slices.IndexFunc(d.Unmet, func(u Unmet) bool { return u.Condition == cond }); i >= 0 {
			u := d.Unmet[i]
			out = append(out, Check{Condition: cond, Required: u.Required, Have: u.Have, HowToMeet: u.HowToMeet})
			return
		}
		out = append(out, Check{Condition: cond, Met: true, Required: required, Have: have})
	}
	if c.MinDisclosure != "" {
		add(CondMinDisclosure, c.MinDisclosure, f.Disclosure)
	}
	if c.MinAuthLevel != nil {
		add(CondMinAuthLevel, c.MinAuthLevel.String(), f.AuthLevel.String())
	}
	if c.Temperature != "" {
		have := f.Temperature
		if have == "" {
			have = Cool
		}
		add(CondTemperature, c.Temperature, have)
	}
	if len(c.Persona) > 0 {
		required := c.Persona[0]
		if len(c.Persona) > 1 {
			required = "one of " + strings.Join(c.Persona, ", ")
		}
		add(CondPersona, required, f.Persona)
	}
	if len(c.Peers) > 0 {
		add(CondPeers, "an allow-listed peer", "allow-listed")
	}
	if c.MaxConcurrent != 0 {
		add(CondMaxConcurrent, fmt.Sprintf("fewer than %d running", c.MaxConcurrent), fmt.Sprintf("%d running", f.InFlight))
	}
	return out
}
