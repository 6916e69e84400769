// Package bench times whole commands on one capture file, for issue 8's
// comparison of kwire with cat and tshark (cmd/kwire-bench, make
// bench-compare).
//
// It takes in a list of Commands (argv templates with {file}, {kwire},
// {ports} placeholders) and a capture file. It runs every command once
// per round, rounds interleaved so that drift on the machine (page cache,
// frequency, neighbours) hits every command alike, with stdout on
// /dev/null. It gives out, per command, the wall time of each run and the
// largest max RSS (wait4 rusage of the command's own process), and a
// Markdown table: MB/s and Kafka frames/s (median run), max RSS, and each
// command's speed relative to cat and to tshark.
//
// Frames are counted once, from the stats line of an untimed `kwire read
// --json` run, which also warms the page cache.
package bench
