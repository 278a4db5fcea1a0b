package identity

import (
	"bytes"
	"errors"
	"fmt"
)

// CheckpointPrefix begins the text of every audit checkpoint this key
// signs (package gossip/auditproof): a C2SP signed note whose first line,
// the origin, is "ifaced-audit/<day>". The note is signed as it is, with
// no prefix added: the note format fixes the bytes signed. No other
// signing input of this package begins this way (they begin with "ifp/"),
// so a checkpoint signature can never be taken for a message, document or
// statement signature, nor one of those for a checkpoint's.
const CheckpointPrefix = "ifaced-audit/"

// ErrNotCheckpoint: SignCheckpoint was given text that is not an audit
// checkpoint.
var ErrNotCheckpoint = errors.New("not an audit checkpoint")

// SignCheckpoint returns the Ed25519 signature by id over the text of an
// audit checkpoint (the note text, its final newline included). It signs
// only text that begins with CheckpointPrefix and ends with a newline.
func (id *Identity) SignCheckpoint(text []byte) ([]byte, error) {
	if !bytes.HasPrefix(text, []byte(CheckpointPrefix)) || !bytes.HasSuffix(text, []byte("\n")) {
		return nil, fmt.Errorf("signing an audit checkpoint: %w: the text must begin with %q and end with a newline", ErrNotCheckpoint, CheckpointPrefix)
	}
	return id.sign(text), nil
}
