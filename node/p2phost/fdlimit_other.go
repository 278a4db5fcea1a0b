//go:build !unix

package p2phost

// processFDLimit: without getrlimit, the 4,096 the daemon always assumed.
func processFDLimit() uint64 { return 4096 }
