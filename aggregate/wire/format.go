package wire

import (
	"fmt"
	"strings"

	"github.com/kwire/kwire/internal/version"
)

// Formats and compatibility.
//
// A batch's first byte is its format. Every format from 6 on begins
//
//	version:byte host:string run:uvarint seq:uvarint
//	kwire_version:string kwire_commit:string
//
// and later formats keep that beginning, changing only what follows it:
// an aggregator that does not know a batch's format still reads who sent
// it and which kwire that agent runs, and says so (VersionError).

// dirty ends a commit whose work tree had uncommitted changes
// (version.Build.Modified), as the Makefile's COMMIT does.
const dirty = "-dirty"

// knownFormat says whether this build reads format v.
func knownFormat(v byte) bool {
	switch v {
	case versionV2, versionV2Signed, versionV4, versionV4Signed, Version, VersionSigned:
		return true
	}
	return false
}

// build reads the agent's build of a format 6 (or later) header.
func (r *reader) build() version.Build {
	b := version.Build{Version: r.string()}
	b.Commit, b.Modified = strings.CutSuffix(r.string(), dirty)
	return b
}

// VersionError is Decode's (and Keyring.Verify's) error for a batch of a
// format this build does not read: a newer agent's (or not a batch). It
// is ErrVersion (errors.Is).
type VersionError struct {
	// Format is the batch's first byte.
	Format byte
	// Agent and Kwire are who sent it and the kwire it runs, when the
	// format is newer than this build's (the header every format from 6
	// on begins with); zero when they could not be read.
	Agent Agent
	Kwire version.Build
}

func (e *VersionError) Error() string {
	this := version.Get().Build()
	what := fmt.Sprintf("batch of format %d", e.Format)
	if e.Agent.Host != "" {
		what = fmt.Sprintf("agent %s (kwire %s) publishes batches of format %d", e.Agent.Host, e.Kwire, e.Format)
	}
	return fmt.Sprintf("%s: %s, which this kwire (%s) cannot read: it reads formats %d to %d; "+
		"upgrade the aggregator to a kwire at least as new as the agents (aggregators first: docs/deploy.md, Upgrades)",
		ErrVersion, what, this, versionV2, VersionSigned)
}

func (e *VersionError) Unwrap() error { return ErrVersion }

// newerFormat is the VersionError of value, a batch of a format this
// build does not read, naming its agent when the format is a newer one.
func newerFormat(value []byte) *VersionError {
	e := &VersionError{Format: value[0]}
	if e.Format > VersionSigned && e.Format < routedV1 {
		r := reader{b: value[1:]}
		a := Agent{Host: r.string(), Run: r.uvarint()}
		r.uvarint() // seq
		b := r.build()
		if r.err == nil {
			e.Agent, e.Kwire = a, b
		}
	}
	return e
}
