//go:build !linux

package caps

import "errors"

// ErrCgo is Linux's; elsewhere Keep does nothing.
var ErrCgo = errors.New("built with cgo")

// Keep does nothing outside Linux, which has no capabilities.
func Keep(keep ...int) ([]int, error) { return nil, nil }

// Name names a capability.
func Name(c int) string { return "" }

// Permitted is false outside Linux.
func Permitted(c int) bool { return false }
