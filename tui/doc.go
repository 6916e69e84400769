// Package tui is kwire's terminal UI: the screens an operator watches while
// kwire captures (kwire live --tui) or replays a capture file (kwire analyze
// FILE --tui).
//
// It takes in what the pipeline produces, never raw traffic: immutable
// correlate.Snapshots, capture.Stats and decode.Stats, correlate events
// (hazards) and a cheap tap on decode exchanges (per API rates, errors and
// latency). It gives out nothing but the screen, and control of a file
// replay (pause, step, pace).
//
// Two goroutines meet in a Feed. The pipeline goroutine, which owns the
// decoder and the Correlator, calls Feed.Exchange and Feed.Event for every
// exchange and event, and Feed.Poll often: at most every 250ms of
// wall time (FeedOptions.Every) Poll takes a Snapshot and publishes a Frame into a one-slot
// mailbox, replacing a frame the UI did not take yet. The UI goroutine
// takes the latest Frame and redraws from it. Nothing the pipeline does
// waits for the UI: when the UI falls behind, frames are dropped, never
// packets.
//
// A Replay sits between a capture file and the decoder and paces its
// chunks by their capture time: as fast as possible, at capture pace (or a
// multiple of it), or paused and stepped from the keyboard. The capture
// clock drives the pacing; the wall clock only says when to release the
// next chunk.
//
// Views: Groups (home, sortable and filterable; columns as wide as their
// content), Group detail (members with their heartbeat age against the
// session timeout, generation timeline, partitions, recent commits; a
// member or partition row opens its own view: a member's generations and
// assignments, heartbeats, fetched partitions, commits and hazards; a
// partition's offsets, lag, lag in seconds, health, owners and commits),
// Hazards (newest first and opened on the newest, a severity filter, the
// selected one's summary whole under the list, enter for its evidence),
// Traffic (per API, with a long-poll Fetch's wait apart from answer
// times, client and broker), and a status bar that always shows loss. Every key is in one table (keys.go) that also writes the help
// screen. Severity and state are always written out, never shown by colour
// alone.
package tui
