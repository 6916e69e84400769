package realkafka

import (
	"os/exec"
	"syscall"
)

// setNodeAttrs makes the kernel SIGKILL a broker JVM if the test process
// dies, so no broker outlives a crashed or killed run.
func setNodeAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
