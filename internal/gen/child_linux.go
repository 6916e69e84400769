package gen

import (
	"os/exec"
	"syscall"
)

// setChildAttrs makes the kernel SIGKILL the child if the generator dies,
// so no client outlives a crashed or killed run.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
