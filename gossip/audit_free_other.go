//go:build !unix

package gossip

import "errors"

// freeBytes cannot be asked here: the free-disk watermark is off, and a
// full disk shows as failing writes.
func freeBytes(string) (uint64, error) { return 0, errors.New("free space unknown on this system") }
