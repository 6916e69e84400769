//go:build !linux

package main

// dropLiveCaps does nothing outside Linux, which has no capabilities.
func (r *liveRun) dropLiveCaps(f *liveFlags) string { return "" }
