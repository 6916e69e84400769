package gen

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerClosed reports whether the client behind nc has closed its side: a
// peek finds end of file (its FIN) and nothing left to read. It neither
// blocks nor takes bytes from the socket.
func peerClosed(nc net.Conn) bool {
	sc, ok := nc.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	// Control, not Read: Read would wait for the lock of the Read
	// blocked on the same socket.
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		closed = n == 0 && err == nil
	})
	return closed
}
