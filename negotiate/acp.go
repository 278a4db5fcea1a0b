// ACP tool categories (agent-client-protocol RFD "requested tool
// categories"): a client hints, with requested_tool_categories, which
// vendor-neutral categories of tools it would like exposed; an agent may
// say which it supports (supported_tool_categories). The hint is only a
// hint: unknown values are ignored, never an error, and nothing is promised
// by asking.

package negotiate

import (
	"slices"
)

// SupportedToolCategories returns the ACP tool categories the capabilities
// of d use, sorted and without repeats; nil when none. Call it on a view:
// on the owner's document a category used only by a hidden capability
// would betray that the capability exists.
func (d *Document) SupportedToolCategories() []string {
	var out []string
	for i := range d.Capabilities {
		for _, cat := range d.Capabilities[i].Categories {
			if ValidToolCategory(cat) {
				out = append(out, cat)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// OrderByCategories returns a copy of the view v whose capabilities in any
// of the requested categories come first, each group keeping v's order,
// and the requested categories that v supports, in the order requested and
// without repeats. Values that are not tool categories, or that no
// capability of v has, are ignored. v itself is not modified; the copy
// shares each capability's schemas and conditions with it.
func OrderByCategories(v *Document, requested []string) (*Document, []string) {
	// requested comes from a peer and may be long: look it up in sets.
	supported := map[string]bool{}
	for _, cat := range v.SupportedToolCategories() {
		supported[cat] = true
	}
	var honoured []string
	chosen := map[string]bool{}
	for _, cat := range requested {
		if supported[cat] && !chosen[cat] {
			chosen[cat] = true
			honoured = append(honoured, cat)
		}
	}
	out := *v
	out.Capabilities = make([]Capability, 0, len(v.Capabilities))
	wanted := func(c *Capability) bool {
		return slices.ContainsFunc(c.Categories, func(cat string) bool { return chosen[cat] })
	}
	for i := range v.Capabilities {
		if wanted(&v.Capabilities[i]) {
			out.Capabilities = append(out.Capabilities, v.Capabilities[i])
		}
	}
	for i := range v.Capabilities {
		if !wanted(&v.Capabilities[i]) {
			out.Capabilities = append(out.Capabilities, v.Capabilities[i])
		}
	}
	return &out, honoured
}
