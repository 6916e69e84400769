package main

import (
	"os"
	"strings"
)

// referenceEnv names the fast paths to leave off, for the tests that
// hold each to its reference (the dependency it stands beside): a comma
// list of lines (exchange and commit lines: jsonout's Summary and
// encoding/json), read (pcapng files: pcapgo alone), tcp (gopacket's
// reassembly alone, without the in-order fast path), kmsg (every Kafka
// body read by kmsg alone, without decode's fast paths), or all. It is
// not a flag: nobody but those tests has a reason to set it.
const referenceEnv = "KWIRE_REFERENCE"

// reference says which fast paths are off.
type reference struct {
	lines, read, tcp, kmsg bool
}

// referenceFromEnv reads referenceEnv.
func referenceFromEnv() reference {
	var r reference
	for _, name := range strings.Split(os.Getenv(referenceEnv), ",") {
		switch strings.TrimSpace(name) {
		case "all":
			r = reference{lines: true, read: true, tcp: true, kmsg: true}
		case "lines":
			r.lines = true
		case "read":
			r.read = true
		case "tcp":
			r.tcp = true
		case "kmsg":
			r.kmsg = true
		}
	}
	return r
}
