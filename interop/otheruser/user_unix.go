//go:build unix

package otheruser

import (
	"os/exec"
	"syscall"
)

const supported = true

// asOther makes cmd run as the other user, with no supplementary groups
// (root's would otherwise stay with it).
func asOther(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: UID, Gid: GID, Groups: []uint32{}}}
}
