//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kwire/kwire/capture"
)

// TestEBPFSyscalls drives each traced system call on one IPv6 loopback
// connection whose broker side does all the work (so its socket is the
// one followed): write, writev, sendmsg and sendfile out, recvmsg in,
// with a 6-byte copy limit.
func TestEBPFSyscalls(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	src := openEBPF(t, &capture.EBPFOptions{SnapBytes: 6, TickEvery: 50 * time.Millisecond}, strconv.Itoa(port))
	file := filepath.Join(t.TempDir(), "records")
	if err := os.WriteFile(file, make([]byte, 10000), 0o600); err != nil {
		t.Fatal(err)
	}

	chunks := map[capture.Dir][]string{}
	var conn *capture.Conn
	closed := make(chan struct{})
	closes := 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, capture.SinkFunc(func(c *capture.Chunk) {
			conn = c.Conn
			switch c.Kind {
			case capture.Data:
				chunks[c.Dir] = append(chunks[c.Dir], "data "+string(c.Data))
			case capture.Gap:
				chunks[c.Dir] = append(chunks[c.Dir], fmt.Sprintf("gap %d", c.Len))
			case capture.Close:
				chunks[c.Dir] = append(chunks[c.Dir], "close "+c.Reason.String())
				if closes++; closes == 2 {
					close(closed)
				}
			}
		}))
	}()

	serverErr := make(chan error, 1)
	go func() { serverErr <- serveSyscalls(ln, file) }()
	c, err := net.Dial("tcp6", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	want := 4 + 12 + 4 + 10000
	if n, err := io.ReadFull(c, make([]byte, want)); err != nil {
		t.Fatalf("client read %d of %d bytes: %v", n, want, err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := <-serverErr; err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-closed:
	case <-time.After(waitTimeout):
		t.Fatal("no close")
	}
	cancel()
	<-done

	wantChunks := map[capture.Dir][]string{
		capture.ToClient: {"data HDR!", "data aaaa", "data bb", "gap 2", "gap 4", "data xx", "data yy", "gap 10000", "close fin"},
		capture.ToServer: {"data ping", "close fin"},
	}
	if !reflect.DeepEqual(chunks, wantChunks) {
		t.Errorf("chunks:\n got %q\nwant %q", chunks, wantChunks)
	}
	if conn.Server.Port() != uint16(port) || !conn.Server.Addr().Is6() || conn.Client.Addr() != conn.Server.Addr() {
		t.Errorf("conn %s -> %s, want [::1]:* -> [::1]:%d", conn.Client, conn.Server, port)
	}
	if conn.Process == nil || conn.Process.PID != uint32(os.Getpid()) {
		t.Errorf("conn process %+v, want pid %d (learned from the client's socket)", conn.Process, os.Getpid())
	}
	if st := src.Stats(); st.EBPF.SendfileBytes != 10000 || st.EBPF.MutedSockets != 1 {
		t.Errorf("sendfile bytes %d, muted sockets %d; want 10000, 1", st.EBPF.SendfileBytes, st.EBPF.MutedSockets)
	}
}

// serveSyscalls accepts one connection and moves bytes on it with each
// system call in turn.
func serveSyscalls(ln net.Listener, file string) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("HDR!")); err != nil { // write
		return err
	}
	bufs := net.Buffers{[]byte("aaaa"), []byte("bbbb"), []byte("cccc")}
	if _, err := bufs.WriteTo(c); err != nil { // writev
		return err
	}
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	err = rc.Write(func(fd uintptr) bool { // sendmsg
		_, opErr = unix.SendmsgBuffers(int(fd), [][]byte{[]byte("xx"), []byte("yy")}, nil, nil, 0)
		return opErr != unix.EAGAIN
	})
	if err = errors.Join(err, opErr); err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := c.(*net.TCPConn).ReadFrom(f); err != nil { // sendfile
		return err
	}
	buf := make([]byte, 4)
	got := 0
	err = rc.Read(func(fd uintptr) bool { // recvmsg
		got, _, _, _, opErr = unix.Recvmsg(int(fd), buf, nil, 0)
		return opErr != unix.EAGAIN
	})
	if err = errors.Join(err, opErr); err != nil || string(buf[:got]) != "ping" {
		return fmt.Errorf("recvmsg %q: %v", buf[:got], err)
	}
	return nil
}
