package conditions

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Facts are what the owner's daemon established itself about a requester in
// this conversation. None of them is taken from the requester's word.
type Facts struct {
	Peer        string // the requester's verified peer ID (or agent id); "" for an anonymous caller
	AuthLevel   Level  // NoLevel for an unauthenticated caller
	Disclosure  string // the tier the owner granted (already capped by the disclosure map)
	Temperature string // negotiated temperature ("" treated as cool)
	Persona     string // the owner's active persona in this conversation ("" = default persona)
	InFlight    int    // invocations of this capability currently running for everyone
}

// Condition names one condition field, as it appears on the wire.
type Condition string

// The conditions, in the order Evaluate reports them.
const (
	CondMinDisclosure Condition = "min_disclosure"
	CondMinAuthLevel  Condition = "min_auth_level"
	CondTemperature   Condition = "temperature"
	CondPersona       Condition = "persona"
	CondPeers         Condition = "peers"
	CondMaxConcurrent Condition = "max_concurrent"
)

// Unmet is one condition the requester does not meet, phrased for the
// requester: it travels in the IFP-3 error phase message.
type Unmet struct {
	Condition Condition `json:"condition"`
	Required  string    `json:"required"`    // e.g. "professional", "2 (verified)", "warm"
	Have      string    `json:"have"`        // e.g. "public", "1 (signed)", "cool", "none"
	HowToMeet string    `json:"how_to_meet"` // an actionable sentence for the requester
}

// Decision is the outcome of evaluating one capability's conditions on Facts.
type Decision struct {
	Unmet      []Unmet       `json:"unmet,omitempty"` // in the fixed order of the Condition constants
	RetryAfter time.Duration `json:"-"`               // > 0 only when the sole problem is max_concurrent (busy)
}

// Met reports whether every condition is met.
func (d Decision) Met() bool { return len(d.Unmet) == 0 }

// Eligible reports whether every condition but max_concurrent is met.
// Workload is transient, so a capability that is only busy is still shown as
// available; the invocation itself is refused with a retry hint.
func (d Decision) Eligible() bool {
	for _, u := range d.Unmet {
		if u.Condition != CondMaxConcurrent {
			return false
		}
	}
	return true
}

// Busy reports whether max_concurrent is the only unmet condition.
func (d Decision) Busy() bool {
	return len(d.Unmet) == 1 && d.Unmet[0].Condition == CondMaxConcurrent
}

// Absent reports whether the persona condition is unmet: the capability does
// not exist under the owner's active persona, and should be treated as not
// existing rather than shown with its conditions (see the package comment).
func (d Decision) Absent() bool {
	for _, u := range d.Unmet {
		if u.Condition == CondPersona {
			return true
		}
	}
	return false
}

// Error returns nil when d is met, and otherwise a [*NotMetError], which
// wraps ErrNotMet, and ErrBusy too when d is only busy.
func (d Decision) Error() error {
	if d.Met() {
		return nil
	}
	return &NotMetError{Unmet: slices.Clone(d.Unmet), RetryAfter: d.RetryAfter}
}

// NotMetError is the error of a refused request. Its message lists every
// unmet condition with what was required, what the requester has and how to
// meet it; callers building an IFP-3 error phase message can take the
// structured Unmet list instead, with errors.As.
type NotMetError struct {
	Unmet      []Unmet
	RetryAfter time.Duration
}

func (e *NotMetError) Error() string {
	var b strings.Builder
	if e.busy() {
		b.WriteString(ErrBusy.Error())
	} else {
		b.WriteString(ErrNotMet.Error())
	}
	for i, u := range e.Unmet {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: required %s, have %s (%s)", u.Condition, u.Required, u.Have, u.HowToMeet)
	}
	return b.String()
}

func (e *NotMetError) busy() bool { return Decision{Unmet: e.Unmet}.Busy() }

// Is makes errors.Is(err, ErrNotMet) hold for every refusal, and
// errors.Is(err, ErrBusy) only for a refusal that retrying may cure.
func (e *NotMetError) Is(target error) bool {
	return target == ErrNotMet || (target == ErrBusy && e.busy())
}

// Evaluate decides c on f under order (nil means the standard tiers). It
// never panics, and fails closed: a fact it does not recognise ranks below
// everything, and a condition Validate would reject is met by no one. A
// NoLevel requester meets no min_auth_level, not even 0; an empty
// Temperature counts as cool. max_concurrent is unmet when InFlight >=
// MaxConcurrent; when that is the only unmet condition, RetryAfter is
// retryHint.
func Evaluate(c Conditions, f Facts, order *TierOrder, retryHint time.Duration) Decision {
	order = order.orDefault()
	var d Decision
	if c.MinDisclosure != "" && !order.AtLeast(f.Disclosure, c.MinDisclosure) {
		d.Unmet = append(d.Unmet, unmetDisclosure(c.MinDisclosure, f, order))
	}
	if c.MinAuthLevel != nil && !f.AuthLevel.AtLeast(*c.MinAuthLevel) {
		d.Unmet = append(d.Unmet, unmetLevel(*c.MinAuthLevel, f))
	}
	if c.Temperature != "" {
		if u, ok := checkTemperature(c.Temperature, f); !ok {
			d.Unmet = append(d.Unmet, u)
		}
	}
	// The default persona has no name, so it matches no entry, not even an
	// (invalid) empty one.
	if len(c.Persona) > 0 && (f.Persona == "" || !slices.Contains(c.Persona, f.Persona)) {
		d.Unmet = append(d.Unmet, unmetPersona(c.Persona, f.Persona))
	}
	// An anonymous caller is never on the list, even if the owner's list
	// (invalidly) holds an empty entry.
	if len(c.Peers) > 0 && (f.Peer == "" || !slices.Contains(c.Peers, f.Peer)) {
		d.Unmet = append(d.Unmet, unmetPeers(f.Peer))
	}
	// A negative limit is invalid; failing closed, it admits no one.
	if c.MaxConcurrent < 0 || (c.MaxConcurrent > 0 && f.InFlight >= c.MaxConcurrent) {
		d.Unmet = append(d.Unmet, unmetWorkload(c.MaxConcurrent, f.InFlight, retryHint))
	}
	if d.Busy() && c.MaxConcurrent > 0 && retryHint > 0 {
		d.RetryAfter = retryHint
	}
	return d
}

// keyless reports whether the requester proved no key at all: no peer ID
// and no authentication level, as an HTTP caller who signed nothing.
func (f Facts) keyless() bool { return f.Peer == "" && f.AuthLevel == NoLevel }

// withoutKey opens the advice to a keyless requester (Facts.keyless): it
// has no peer ID the owner could pin, list or raise, so every way to meet
// a condition that names the requester starts with getting a key.
const withoutKey = "you called without a key: sign your requests with a key of your own (an IFP-5 signed message, over libp2p or to the HTTP inbox)"

func unmetDisclosure(min string, f Facts, order *TierOrder) Unmet {
	have := f.Disclosure
	u := Unmet{Condition: CondMinDisclosure, Required: min, Have: have}
	switch {
	case have == "":
		u.Have = "none"
	case !order.Known(have):
		u.Have = have + " (not a tier of this owner)"
	}
	switch {
	case order.Known(min) && f.keyless():
		u.HowToMeet = fmt.Sprintf("%s, then ask the owner to raise its disclosure tier to %q or higher", withoutKey, min)
	case order.Known(min):
		u.HowToMeet = fmt.Sprintf("ask the owner to raise your disclosure tier to %q or higher", min)
	default:
		u.HowToMeet = fmt.Sprintf("no tier meets %q: the owner's conditions name an unknown tier; ask the owner to fix them", min)
	}
	return u
}

func unmetLevel(min Level, f Facts) Unmet {
	u := Unmet{Condition: CondMinAuthLevel, Required: min.String(), Have: f.AuthLevel.String()}
	peer := "<peer>"
	if f.Peer != "" {
		peer = f.Peer
	}
	switch keyless := f.keyless(); {
	case min == Signed && keyless:
		u.HowToMeet = "reach authentication level 1 (signed): " + withoutKey
		return u
	case min == Verified && keyless:
		u.HowToMeet = "reach authentication level 2 (verified): " + withoutKey + ", then have the owner pin that key (`ifaced trust <your peer ID> --verify <fingerprint>`), or publish an identity document at your agent_id URL that lists it"
		return u
	case min == Bound && keyless:
		u.HowToMeet = "reach authentication level 3 (bound): " + withoutKey + ", under an agent_id that is an https URL or did:web whose document binds that key"
		return u
	}
	switch min {
	case Introduced:
		// Level 0 is met by any proved level, so signing (1) works as well as a token.
		u.HowToMeet = "reach authentication level 0 (introduced): present an introduction token minted by the owner (`ifaced introduce`), or sign your messages with the key of your peer ID"
	case Signed:
		u.HowToMeet = "reach authentication level 1 (signed): sign your messages with the key of your peer ID"
	case Verified:
		u.HowToMeet = fmt.Sprintf("reach authentication level 2 (verified): have the owner pin your key with `ifaced trust %s --verify <fingerprint>`, or publish an identity document at your agent_id URL that lists your key", peer)
	case Bound:
		u.HowToMeet = "reach authentication level 3 (bound): use an agent_id that is an https URL or did:web whose document binds your key"
	default:
		u.HowToMeet = fmt.Sprintf("no authentication level meets %d: the owner's conditions are invalid; ask the owner to fix them", int(min))
	}
	return u
}

func checkTemperature(min string, f Facts) (Unmet, bool) {
	have := f.Temperature
	if have == "" {
		have = Cool
	}
	rm, minOK := TemperatureRank(min)
	rh, haveOK := TemperatureRank(have)
	if minOK && haveOK && rh >= rm {
		return Unmet{}, true
	}
	u := Unmet{Condition: CondTemperature, Required: min, Have: have}
	if !haveOK {
		u.Have = have + " (not a temperature)"
	}
	switch {
	case minOK && f.keyless():
		u.HowToMeet = fmt.Sprintf("an anonymous request is cool; %s, greet, and propose temperature %q in your greeting; the owner must allow it for you", withoutKey, min)
	case minOK:
		u.HowToMeet = fmt.Sprintf("propose temperature %q in your greeting; the owner must allow it for you", min)
	default:
		u.HowToMeet = fmt.Sprintf("no temperature meets %q: the owner's conditions are invalid; ask the owner to fix them", min)
	}
	return u, false
}

func unmetPersona(personas []string, active string) Unmet {
	u := Unmet{Condition: CondPersona, Required: personas[0], Have: active}
	if active == "" {
		u.Have = "the default persona"
	}
	quoted := make([]string, len(personas))
	for i, p := range personas {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	u.HowToMeet = "this capability is offered only under persona " + quoted[0]
	if len(personas) > 1 {
		u.Required = "one of " + strings.Join(personas, ", ")
		u.HowToMeet = "this capability is offered only under personas " + strings.Join(quoted, ", ")
	}
	return u
}

// unmetPeers never mentions the list: not its entries, not its length.
func unmetPeers(peer string) Unmet {
	const limited = "this capability is limited to a list of peers chosen by the owner"
	if peer == "" {
		return Unmet{Condition: CondPeers, Required: "an allow-listed peer", Have: "anonymous",
			HowToMeet: limited + "; identify yourself by signing your messages, and ask the owner to add your peer ID"}
	}
	return Unmet{Condition: CondPeers, Required: "an allow-listed peer", Have: "not allow-listed",
		HowToMeet: limited + "; ask the owner to add your peer ID"}
}

func unmetWorkload(max, inFlight int, retryHint time.Duration) Unmet {
	u := Unmet{Condition: CondMaxConcurrent, Have: fmt.Sprintf("%d running", inFlight)}
	if max < 0 {
		u.Required = fmt.Sprintf("%d (invalid)", max)
		u.HowToMeet = fmt.Sprintf("this capability admits no one: its max_concurrent (%d) is invalid; ask the owner to fix it", max)
		return u
	}
	u.Required = fmt.Sprintf("fewer than %d running", max)
	retry := "retry later"
	if retryHint > 0 {
		retry = "retry after " + retryHint.String()
	}
	u.HowToMeet = fmt.Sprintf("busy: %d of %d running; %s", inFlight, max, retry)
	return u
}
