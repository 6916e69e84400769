package correlate

import "time"

// TimeFormat is how NDJSON writes every time: RFC 3339 in UTC with
// exactly six fractional digits (microseconds, truncated), e.g.
// "2026-11-29T10:52:36.123456Z". One fixed width, so that times compare
// as strings and jq can cut them at fixed places (docs/schema.md).
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// Time is a capture time in the NDJSON schema: every time field of the
// events and the snapshot has this type, so that encoding/json writes it
// in TimeFormat (time.Time's own MarshalJSON trims trailing zeros and
// writes nanoseconds). It is a time.Time otherwise: its methods are
// time.Time's.
type Time struct{ time.Time }

// MarshalJSON writes t in TimeFormat, in UTC.
func (t Time) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(TimeFormat)+2)
	return AppendTime(b, t.Time), nil
}

// AppendTime appends t as a JSON string in TimeFormat, in UTC, as
// Time's MarshalJSON writes it.
func AppendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeFormat)
	return append(b, '"')
}

// TimeOf is t, in UTC, as a Time.
func TimeOf(t time.Time) Time { return Time{t.UTC()} }

// timePtr is t as a *Time, nil for the zero time (unknown).
func timePtr(t time.Time) *Time {
	if t.IsZero() {
		return nil
	}
	return &Time{t.UTC()}
}

// stamp is t as text in TimeFormat, in UTC: times named in a hazard's
// summary read as the NDJSON's do.
func stamp(t time.Time) string { return t.UTC().Format(TimeFormat) }
