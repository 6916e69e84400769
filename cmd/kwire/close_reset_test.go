package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kwire/kwire/internal/captest"
)

// TestCloseReset is issue 41's close pattern on the TLS captures: Go
// clients close with a TLS close_notify and a FIN, kfake answers with its
// own close_notify, and the client's kernel answers that with a bare RST;
// the broker, reset, never sends a FIN (the generator's tap records it so,
// as a real kernel does). Both directions end at the RST, so a Fetch the
// broker never answered is flushed at the connection's end, in capture
// order, not at the end of the file (where, with the request's offset as
// the position, it rolled every position back). The group's committed
// offsets are the truth's, a partition whose committed offset is its end
// has lag 0, and the capture without its RSTs gives the same figures.
func TestCloseReset(t *testing.T) {
	dir := filepath.Join(testdataDir(), "tls")
	for _, name := range []string{"tls13", "tls12"} {
		t.Run(name, func(t *testing.T) {
			pcap, keylog := filepath.Join(dir, name+".pcapng"), filepath.Join(dir, name+".keylog")
			var tr tlsTruth
			if err := json.Unmarshal(readFile(t, filepath.Join(dir, name+".truth.json")), &tr); err != nil {
				t.Fatal(err)
			}
			noRST, dropped, err := captest.DropResets(readFile(t, pcap))
			if err != nil {
				t.Fatal(err)
			}
			if dropped == 0 {
				t.Fatalf("%s has no RST: regenerate it (make captures) with the tap that records the client's reset", pcap)
			}
			stripped := filepath.Join(t.TempDir(), name+".norst.pcapng")
			if err := os.WriteFile(stripped, noRST, 0o600); err != nil {
				t.Fatal(err)
			}

			out, errs := runOutput([]string{"read", "--json", "--tls-keylog", keylog, pcap})
			missing, late := flushedLate(t, out)
			if missing == 0 {
				t.Errorf("no unanswered request in %s: the test proves nothing (%s)", name, errs)
			}
			for _, l := range late {
				t.Errorf("unanswered request flushed after exchanges more than 1s past its connection's end: %s", l)
			}

			want := closeFigures(t, "--tls-keylog", keylog, pcap)
			got := closeFigures(t, "--tls-keylog", keylog, stripped)
			if d := diffLines(want, got); d != "" {
				t.Errorf("without its %d RSTs the capture tells another story (-with +without):\n%s", dropped, d)
			}
			r := analyzeTLS(t, "--tls-keylog", keylog, pcap)
			for g, topics := range tr.Committed {
				for topic, parts := range topics {
					for p, off := range parts {
						if c := r.committed[g][topic][p]; c != off {
							t.Errorf("%s %s/%s: committed %d, truth %d", g, topic, p, c, off)
						}
					}
				}
			}
		})
	}
}

// flushedLate reads kwire read's NDJSON and returns how many exchanges
// had no response, and those printed after an exchange whose request came
// more than a second after the last packet of their own connection (its
// close): flushed at the end of the file, not at their connection's end.
func flushedLate(t *testing.T, out []byte) (missing int, late []string) {
	t.Helper()
	type exchange struct {
		Type string    `json:"type"`
		TS   time.Time `json:"ts"`
		Conn struct {
			ID int64 `json:"id"`
		} `json:"conn"`
		Response string `json:"response"`
		API      string `json:"api"`
		Corr     int32  `json:"correlation_id"`
	}
	var all []exchange
	last := map[int64]time.Time{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e exchange
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type != "exchange" {
			continue
		}
		all = append(all, e)
		if e.TS.After(last[e.Conn.ID]) {
			last[e.Conn.ID] = e.TS
		}
	}
	var newest time.Time
	for _, e := range all {
		if e.Response == "missing" {
			missing++
			if newest.Sub(last[e.Conn.ID]) > time.Second {
				late = append(late, e.API+" conn "+strconv.FormatInt(e.Conn.ID, 10)+" correlation id "+strconv.Itoa(int(e.Corr))+
					" at "+e.TS.Format(time.RFC3339Nano)+", printed after one at "+newest.Format(time.RFC3339Nano))
			}
		}
		if e.TS.After(newest) {
			newest = e.TS
		}
	}
	return missing, late
}

// closeFigures is what analyze says of each group partition: committed,
// position, end and lag; a partition whose committed offset is its end
// must have lag 0.
func closeFigures(t *testing.T, args ...string) []string {
	t.Helper()
	out, errs := runOutput(append([]string{"analyze", "--json"}, args...))
	var s struct {
		Groups []struct {
			Group      string `json:"group"`
			Partitions []struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Committed *int64 `json:"committed"`
				Position  *int64 `json:"position"`
				EndOffset *int64 `json:"end_offset"`
				Lag       *int64 `json:"lag"`
			} `json:"partitions"`
		} `json:"groups"`
	}
	summaryLine(t, out, &s)
	var lines []string
	for _, g := range s.Groups {
		for _, p := range g.Partitions {
			if p.Committed != nil && p.EndOffset != nil && *p.Committed == *p.EndOffset && (p.Lag == nil || *p.Lag != 0) {
				t.Errorf("%s %s/%d: committed %d = end, lag %v", g.Group, p.Topic, p.Partition, *p.Committed, ptrText(p.Lag))
			}
			lines = append(lines, g.Group+" "+p.Topic+"/"+strconv.Itoa(int(p.Partition))+": committed "+ptrText(p.Committed)+
				" position "+ptrText(p.Position)+" end "+ptrText(p.EndOffset)+" lag "+ptrText(p.Lag))
		}
	}
	if len(lines) == 0 {
		t.Fatalf("analyze %v: no group partitions (%s)", args, errs)
	}
	return lines
}

func ptrText(p *int64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatInt(*p, 10)
}
