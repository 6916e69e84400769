// Package jsonout writes kwire's output: NDJSON lines (see
// docs/schema.md) or a human-readable one-line-per-item text form, from the
// exchanges and anomalies of package decode and the events of package
// correlate.
//
// A Writer is not safe for concurrent use. Offline output is deterministic:
// every time comes from the capture, never from the wall clock.
package jsonout
