package node

import (
	"github.com/fxamacker/cbor/v2"
	"github.com/ifaced/ifaced/node/admit"
)

func cborMarshal(v any) ([]byte, error) {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		return nil, err
	}
	return em.Marshal(v)
}

// WithBeforeFit has the door run f just before its fit step: a seam where
// a test holds messages to race them at that step.
func WithBeforeFit(f func(*admit.Arrival)) Option { return func(n *Node) { n.beforeFit = f } }
