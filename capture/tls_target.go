package capture

import (
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"errors"
	"fmt"
	"go/version"
	"slices"

	"golang.org/x/arch/x86/x86asm"
)

// The binaries and libraries the TLS probes go into (EBPFOptions.TLS),
// found by reading their ELF files: OpenSSL's libssl (or a binary linking
// it statically) by its dynamic symbols, Go's crypto/tls by the function
// table every Go binary keeps for its runtime (.gopclntab), which
// stripping (-s -w, as go test and most release builds do) leaves.

// tlsLib is the TLS library a target holds.
type tlsLib uint8

const (
	tlsLibNone tlsLib = iota
	tlsLibOpenSSL
	tlsLibGo
)

// tlsTarget is an ELF file with a TLS library to probe.
type tlsTarget struct {
	lib tlsLib
	// ssl lists the OpenSSL functions it defines (of sslFuncs).
	ssl []string
	// goFuncs are the crypto/tls functions probed, goVersion the Go that
	// built it.
	goFuncs   []goFunc
	goVersion string
}

// goFunc is a Go function: where it starts in the file, and its RET
// instructions (offsets from its start), where its results are read.
type goFunc struct {
	name   string
	offset uint64
	rets   []uint64
}

// sslFuncs are the OpenSSL functions probed.
var sslFuncs = []string{"SSL_write", "SSL_read", "SSL_write_ex", "SSL_read_ex", "SSL_do_handshake", "SSL_connect", "SSL_accept"}

// The crypto/tls functions probed: Write and Read at entry and at every
// RET, handshakeContext at entry (to mark the socket before its first
// handshake byte).
const (
	goTLSWrite     = "crypto/tls.(*Conn).Write"
	goTLSRead      = "crypto/tls.(*Conn).Read"
	goTLSHandshake = "crypto/tls.(*Conn).handshakeContext"
)

// errNoTLSLib says that a file holds no TLS library kwire probes.
var errNoTLSLib = errors.New("no TLS library kwire can probe (OpenSSL libssl, Go crypto/tls)")

// errBadELF says that reading a file's ELF structures failed in a way
// the readers did not foresee (a panic in debug/elf, debug/gosym or the
// disassembler, on a damaged or crafted file).
var errBadELF = errors.New("damaged ELF file")

// inspectTLS reads the ELF file at path and says which TLS library it
// holds and where its functions are. Errors wrap errNoTLSLib when it
// holds none; other errors say why it cannot be probed. The files are
// whatever the processes on the host run, crafted ones included: a
// reader's panic on one is that file's error (errBadELF), not kwire's end.
func inspectTLS(path string) (tg *tlsTarget, err error) {
	defer recoverELF(&err)
	return inspectELF(path)
}

// recoverELF turns a panic while reading an ELF file into *err.
func recoverELF(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: reading it failed: %v", errBadELF, r)
	}
}

// inspectELF is inspectTLS without the recover.
func inspectELF(path string) (*tlsTarget, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if syms, err := f.DynamicSymbols(); err == nil {
		var have []string
		for _, s := range syms {
			if s.Section != elf.SHN_UNDEF && s.Value != 0 && elf.ST_TYPE(s.Info) == elf.STT_FUNC && slices.Contains(sslFuncs, s.Name) && !slices.Contains(have, s.Name) {
				have = append(have, s.Name)
			}
		}
		if slices.Contains(have, "SSL_write") && slices.Contains(have, "SSL_read") {
			return &tlsTarget{lib: tlsLibOpenSSL, ssl: have}, nil
		}
	}
	if f.Section(".gopclntab") == nil {
		return nil, errNoTLSLib
	}
	return inspectGo(path, f)
}

// inspectGo finds crypto/tls's functions in a Go binary and their RET
// instructions.
func inspectGo(path string, f *elf.File) (*tlsTarget, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("go binary without build information: %w", err)
	}
	// Go 1.17 brought the register ABI the probes read arguments by.
	if version.Compare(bi.GoVersion, "go1.17") < 0 {
		return nil, fmt.Errorf("built by %s: the TLS probes read Go 1.17+'s register arguments", bi.GoVersion)
	}
	if f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("a %s binary: kwire's Go TLS probes are for x86-64", f.Machine)
	}
	text := f.Section(".text")
	pcln, err := f.Section(".gopclntab").Data()
	if text == nil || err != nil {
		return nil, fmt.Errorf("go function table unreadable: %v", err)
	}
	if err := checkFuncCount(pcln); err != nil {
		return nil, err
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(pcln, text.Addr))
	if err != nil {
		return nil, fmt.Errorf("go function table: %w", err)
	}
	code, err := text.Data()
	if err != nil {
		return nil, err
	}
	t := &tlsTarget{lib: tlsLibGo, goVersion: bi.GoVersion}
	for _, name := range []string{goTLSWrite, goTLSRead, goTLSHandshake} {
		fn := tab.LookupFunc(name)
		if fn == nil {
			if name == goTLSWrite {
				return nil, errNoTLSLib // a Go program without crypto/tls
			}
			return nil, fmt.Errorf("go binary with %s but no %s", goTLSWrite, name)
		}
		if fn.Entry < text.Addr || fn.End > text.Addr+uint64(len(code)) || fn.End <= fn.Entry {
			return nil, fmt.Errorf("%s: outside .text", name)
		}
		off, ok := fileOffset(f, fn.Entry)
		if !ok {
			return nil, fmt.Errorf("%s: in no executable segment", name)
		}
		g := goFunc{name: name, offset: off}
		if name != goTLSHandshake {
			if g.rets, err = retOffsets(code[fn.Entry-text.Addr : fn.End-text.Addr]); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		t.goFuncs = append(t.goFuncs, g)
	}
	return t, nil
}

// checkFuncCount checks the function count in a .gopclntab header
// against the table's size: gosym allocates a Func (about 100 bytes) per
// function it claims before reading any, so a crafted count made kwire
// ask for hundreds of GB, a fatal error no recover catches. Every Go
// version since 1.2 keeps the count at offset 8, a pointer-sized word
// (the size at offset 7), and at least 8 bytes per function in the table.
func checkFuncCount(pcln []byte) error {
	if len(pcln) < 16 {
		return fmt.Errorf("%w: go function table of %d bytes", errBadELF, len(pcln))
	}
	var n uint64
	switch pcln[7] {
	case 4:
		n = uint64(binary.LittleEndian.Uint32(pcln[8:]))
	case 8:
		n = binary.LittleEndian.Uint64(pcln[8:])
	default:
		return fmt.Errorf("%w: go function table with %d-byte pointers", errBadELF, pcln[7])
	}
	if n > uint64(len(pcln))/8 {
		return fmt.Errorf("%w: go function table claims %d functions in %d bytes", errBadELF, n, len(pcln))
	}
	return nil
}

// retOffsets disassembles a function and returns the offsets of its RET
// instructions. A uprobe must sit on an instruction's first byte, so an
// instruction the disassembler does not know fails the function rather
// than risk one.
func retOffsets(code []byte) ([]uint64, error) {
	var rets []uint64
	for pc := 0; pc < len(code); {
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			return nil, fmt.Errorf("disassembling at +%#x: %w", pc, err)
		}
		if inst.Op == x86asm.RET {
			rets = append(rets, uint64(pc))
		}
		pc += inst.Len
	}
	if len(rets) == 0 {
		return nil, errors.New("no RET instruction")
	}
	return rets, nil
}

// fileOffset converts a virtual address in an executable segment to its
// offset in the file, which is what a uprobe is placed by.
func fileOffset(f *elf.File, addr uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= addr && addr < p.Vaddr+p.Memsz {
			return addr - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}
