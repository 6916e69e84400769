//go:build !linux

package realkafka

import "os/exec"

// setNodeAttrs does nothing here: only Linux can tie a child's life to its
// parent's; Stop (or StartT's cleanup) ends the JVMs.
func setNodeAttrs(*exec.Cmd) {}
