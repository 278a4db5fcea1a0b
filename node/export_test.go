package node

import "github.com/fxamacker/cbor/v2"

func cborMarshal(v any) ([]byte, error) {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		return nil, err
	}
	return em.Marshal(v)
}
