package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// truth is what the generator (internal/gen) recorded while the real
// clients ran: independent of kwire's decoder.
type truth struct {
	Case     string `json:"case"`
	Captures []struct {
		File  string `json:"file"`
		Nodes []int  `json:"nodes"`
	} `json:"captures"`
	RequestsBroker map[string]int `json:"requests_broker"`
	NoResponse     int            `json:"no_response"`
	Frames         []truthConn    `json:"frames"`
}

type truthConn struct {
	Node     int          `json:"node"`
	Client   string       `json:"client"`
	Server   string       `json:"server"`
	HasSYN   bool         `json:"has_syn"`
	ToServer []truthFrame `json:"to_server"`
	ToClient []truthFrame `json:"to_client"`
}

type truthFrame struct {
	Key           int16  `json:"key"`
	Version       int16  `json:"version"`
	CorrelationID int32  `json:"correlation_id"`
	ClientID      string `json:"client_id"`
	Complete      bool   `json:"complete"`
	Intact        bool   `json:"intact"`
}

func loadTruth(t *testing.T, path string) *truth {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr truth
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &tr
}

// seen is one decoded exchange, keyed for comparison with the truth.
type seen struct {
	client, server string
	key, version   int16
	corr           int32
	clientID       string
	hasReq         bool
	response       decode.ResponseState
	hasResp        bool
}

type collector struct {
	ex []seen
	an []decode.Anomaly
}

func (c *collector) Exchange(e *decode.Exchange) {
	c.ex = append(c.ex, seen{client: e.Conn.Client.String(), server: e.Conn.Server.String(), key: e.Key, version: e.Version,
		corr: e.CorrelationID, clientID: e.ClientID, hasReq: e.Req != nil, response: e.Response, hasResp: e.Resp != nil})
}
func (c *collector) Anomaly(a *decode.Anomaly) { c.an = append(c.an, *a) }

func decodeFiles(t *testing.T, files ...string) (*collector, decode.Stats) {
	t.Helper()
	src, err := capture.OpenFiles(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	d := decode.New(c, nil)
	if err := src.Run(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return c, d.Stats()
}

// lossy names the captures that lose bytes on purpose.
var lossy = map[string]bool{"midstream": true, "lossy": true}

// TestTruth checks, on every committed capture, that each request the
// clients sent appears exactly once with its response matched (counts per
// API equal the broker's own), and that clean captures have no anomaly.
// On lossy captures, every request frame that reached the file intact is
// decoded, and every loss is counted.
func TestTruth(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(testdataDir(), "*.truth.json"))
	if len(paths) == 0 {
		t.Fatal("no truth files in testdata: run 'make captures'")
	}
	for _, path := range paths {
		tr := loadTruth(t, path)
		for _, cp := range tr.Captures {
			t.Run(tr.Case+"/"+cp.File, func(t *testing.T) {
				got, st := decodeFiles(t, filepath.Join(filepath.Dir(path), cp.File))
				checkFrames(t, tr, cp.Nodes, got)
				if lossy[tr.Case] {
					if st.Resyncs+st.Gaps == 0 {
						t.Errorf("a lossy capture with no gap or resync counted: %+v", st)
					}
					return
				}
				if len(got.an) > 0 {
					t.Errorf("%d anomalies on a clean capture, first: %+v", len(got.an), got.an[0])
				}
				if slices.Equal(cp.Nodes, allNodes(tr)) {
					checkCounts(t, tr, st)
				}
			})
		}
	}
}

func allNodes(tr *truth) []int {
	var n []int
	for _, c := range tr.Captures {
		for _, x := range c.Nodes {
			if !slices.Contains(n, x) {
				n = append(n, x)
			}
		}
	}
	slices.Sort(n)
	return n
}

// checkCounts compares exchanges per API with the broker's counts.
func checkCounts(t *testing.T, tr *truth, st decode.Stats) {
	t.Helper()
	for api, n := range tr.RequestsBroker {
		key := apiKey(api)
		if got := st.ByKey[key]; got != int64(n) {
			t.Errorf("%s: %d exchanges, broker handled %d", api, got, n)
		}
	}
	var total int
	for _, n := range tr.RequestsBroker {
		total += n
	}
	if st.Exchanges != int64(total) {
		t.Errorf("exchanges: got %d, broker handled %d", st.Exchanges, total)
	}
}

func apiKey(name string) int16 {
	for k := int16(0); k < 128; k++ {
		if kmsg.NameForKey(k) == name {
			return k
		}
	}
	return -1
}

// checkFrames checks every intact request frame of the capture's nodes
// against the decoded exchanges: present exactly once, same header, body
// decoded, and its response matched when that reached the file intact.
func checkFrames(t *testing.T, tr *truth, nodes []int, got *collector) {
	t.Helper()
	type id struct {
		client, server string
		corr           int32
	}
	index := map[id][]seen{}
	for _, e := range got.ex {
		k := id{e.client, e.server, e.corr}
		index[k] = append(index[k], e)
	}
	var missing, wrong []string
	for _, c := range tr.Frames {
		if !slices.Contains(nodes, c.Node) {
			continue
		}
		resp := map[int32]bool{}
		for _, f := range c.ToClient {
			resp[f.CorrelationID] = f.Intact
		}
		for _, f := range c.ToServer {
			if !f.Intact {
				continue
			}
			es := index[id{c.Client, c.Server, f.CorrelationID}]
			desc := fmt.Sprintf("%s>%s %s v%d #%d", c.Client, c.Server, kmsg.NameForKey(f.Key), f.Version, f.CorrelationID)
			switch {
			case len(es) == 0:
				missing = append(missing, desc)
			case len(es) > 1:
				wrong = append(wrong, desc+fmt.Sprintf(": decoded %d times", len(es)))
			case es[0].key != f.Key || es[0].version != f.Version || es[0].clientID != f.ClientID || !es[0].hasReq:
				wrong = append(wrong, desc+fmt.Sprintf(": got %+v", es[0]))
			case resp[f.CorrelationID] && (es[0].response != decode.ResponseSeen || !es[0].hasResp):
				wrong = append(wrong, desc+fmt.Sprintf(": response intact in the capture, got %v (decoded %v)", es[0].response, es[0].hasResp))
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d intact requests not decoded, e.g.\n%s", len(missing), strings.Join(missing[:min(5, len(missing))], "\n"))
	}
	if len(wrong) > 0 {
		t.Errorf("%d requests decoded wrongly, e.g.\n%s", len(wrong), strings.Join(wrong[:min(5, len(wrong))], "\n"))
	}
}
