package report

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kwire/kwire/correlate"
)

// evidenceRow is one exchange a hazard or a generation rests on, as the
// page lists it.
type evidenceRow struct {
	Time          string
	API           string
	ConnID        uint64
	Client        string
	Broker        string
	Process       string
	CorrelationID int32
	Filter        string
}

func evidenceRows(evs []correlate.Evidence) []evidenceRow {
	out := make([]evidenceRow, 0, len(evs))
	for _, e := range evs {
		r := evidenceRow{Time: clock(e.TS.Time), API: e.API, ConnID: e.Conn.ID, Client: e.Conn.Client, Broker: e.Conn.Broker,
			CorrelationID: e.CorrelationID, Filter: wiresharkFilter(e.Conn, e.CorrelationID)}
		if e.Conn.PID != 0 {
			r.Process = fmt.Sprintf("%s (pid %d)", e.Conn.Comm, e.Conn.PID)
		}
		out = append(out, r)
	}
	return out
}

// wiresharkFilter is a display filter that finds one exchange, request and
// response: the connection's two endpoints and the correlation id. Not
// tcp.stream, whose numbers depend on the file and the tool.
func wiresharkFilter(c correlate.Conn, correlationID int32) string {
	var terms []string
	seen := map[string]bool{}
	for _, ep := range []string{c.Client, c.Broker} {
		ap, err := netip.ParseAddrPort(ep)
		if err != nil {
			continue
		}
		field := "ip.addr"
		if ap.Addr().Unmap().Is6() {
			field = "ipv6.addr"
		}
		if a := ap.Addr().Unmap().String(); !seen[a] {
			seen[a] = true
			terms = append(terms, field+"=="+a)
		}
		terms = append(terms, fmt.Sprintf("tcp.port==%d", ap.Port()))
	}
	terms = append(terms, fmt.Sprintf("kafka.correlation_id==%d", correlationID))
	return strings.Join(terms, " && ")
}
