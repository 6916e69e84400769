// Package bpf holds kwire's eBPF socket probes: the C source (kwire.c,
// built against vmlinux.h, the BTF of a kernel dumped by bpftool) and the
// Go bindings and object bpf2go generated from it, committed so that
// building kwire needs no clang. Only the eBPF source in package capture
// imports it.
//
// Regenerate with `make bpf` (installs clang, llvm, libbpf-dev and bpftool
// from Debian packages when missing); `make bpf-check` verifies that the
// committed output is what the sources generate.
package bpf

//go:generate go tool bpf2go -tags linux -target bpfel -type event -output-stem kwire Probe kwire.c -- -I. -O2 -g -Wall -Werror
