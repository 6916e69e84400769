package captest

import (
	"fmt"
	"time"
)

// Window returns a copy of the capture src holding only its records
// between the fractions from and to of its time span (0 is the first
// record's time, 1 the last's): a capture started late and stopped early,
// its connections begun and ended outside it, as a tcpdump started on a
// running cluster writes them. Records keep their bytes and times.
func Window(src []byte, from, to float64) ([]byte, error) {
	f, err := readCapture(src, "captest.Window")
	if err != nil {
		return nil, err
	}
	if len(f.recs) == 0 || from < 0 || to > 1 || from >= to {
		return nil, fmt.Errorf("captest.Window: %d records, window [%g, %g]: want records and 0 <= from < to <= 1", len(f.recs), from, to)
	}
	t0, t1 := f.recs[0].ci.Timestamp, f.recs[len(f.recs)-1].ci.Timestamp
	span := t1.Sub(t0)
	var kept []record
	for _, r := range f.recs {
		at := r.ci.Timestamp.Sub(t0)
		if at >= time.Duration(from*float64(span)) && at <= time.Duration(to*float64(span)) {
			kept = append(kept, r)
		}
	}
	return f.write(kept, src)
}
