package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tlsTruth is what the tls scenarios' truth says that these tests check.
type tlsTruth struct {
	RequestsBroker map[string]int                         `json:"requests_broker"`
	Committed      map[string]map[string]map[string]int64 `json:"committed"`
	Frames         []json.RawMessage                      `json:"frames"` // one per connection
}

// tlsRun is what kwire analyze --json wrote.
type tlsRun struct {
	capture    map[string]any
	byAPI      map[string]int
	anomalies  map[string]int
	committed  map[string]map[string]map[string]int64
	maxMembers map[string]int // per group, the most members of a generation
}

func analyzeTLS(t *testing.T, args ...string) *tlsRun {
	t.Helper()
	out := runKwire(t, append([]string{"analyze", "--json"}, args...)...)
	r := &tlsRun{anomalies: map[string]int{}, committed: map[string]map[string]map[string]int64{}, maxMembers: map[string]int{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l struct {
			Type    string         `json:"type"`
			Kind    string         `json:"kind"`
			Group   string         `json:"group"`
			Members []any          `json:"members"`
			Capture map[string]any `json:"capture"`
			Decode  struct {
				ByAPI map[string]int `json:"exchanges_by_api"`
			} `json:"decode"`
			Groups []struct {
				Group      string `json:"group"`
				Partitions []struct {
					Topic     string `json:"topic"`
					Partition int    `json:"partition"`
					Committed *int64 `json:"committed"`
				} `json:"partitions"`
			} `json:"groups"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		switch l.Type {
		case "anomaly":
			r.anomalies[l.Kind]++
		case "generation":
			r.maxMembers[l.Group] = max(r.maxMembers[l.Group], len(l.Members))
		case "stats":
			r.capture, r.byAPI = l.Capture, l.Decode.ByAPI
		case "summary":
			for _, g := range l.Groups {
				for _, p := range g.Partitions {
					if p.Committed == nil {
						continue
					}
					if r.committed[g.Group] == nil {
						r.committed[g.Group] = map[string]map[string]int64{}
					}
					if r.committed[g.Group][p.Topic] == nil {
						r.committed[g.Group][p.Topic] = map[string]int64{}
					}
					r.committed[g.Group][p.Topic][jsonInt(p.Partition)] = *p.Committed
				}
			}
		}
	}
	return r
}

func jsonInt(i int) string { b, _ := json.Marshal(i); return string(b) }

func (r *tlsRun) count(key string) int {
	v, _ := r.capture[key].(float64)
	return int(v)
}

// TestTLSKeylog analyses the TLS captures (kfake with kfake.TLS, kgo
// clients writing their key log; TLS 1.3, and TLS 1.2 with AES-GCM and
// ChaCha20-Poly1305) with --tls-keylog: every connection is decrypted,
// every request kfake handled is decoded, the group's commits are the
// truth's, and no TLS anomaly is left. With a key log missing one session,
// that connection alone is counted tls_no_keys and reported as TLS.
func TestTLSKeylog(t *testing.T) {
	dir := filepath.Join(testdataDir(), "tls")
	for _, name := range []string{"tls13", "tls12"} {
		t.Run(name, func(t *testing.T) {
			var tr tlsTruth
			if err := json.Unmarshal(readFile(t, filepath.Join(dir, name+".truth.json")), &tr); err != nil {
				t.Fatal(err)
			}
			pcap, keylog := filepath.Join(dir, name+".pcapng"), filepath.Join(dir, name+".keylog")
			r := analyzeTLS(t, "--tls-keylog", keylog, pcap)
			conns := len(tr.Frames)
			if r.count("tls_connections") != conns || r.count("tls_decrypted") != conns || r.count("tls_no_keys") != 0 || r.count("tls_decrypt_failures") != 0 {
				t.Errorf("capture stats %v; want %d TLS connections, all decrypted", r.capture, conns)
			}
			if len(r.anomalies) != 0 {
				t.Errorf("anomalies %v", r.anomalies)
			}
			if !maps.Equal(r.byAPI, tr.RequestsBroker) {
				t.Errorf("exchanges by API %v; kfake handled %v", r.byAPI, tr.RequestsBroker)
			}
			for g, topics := range tr.Committed {
				for topic, parts := range topics {
					if !maps.Equal(r.committed[g][topic], parts) {
						t.Errorf("group %s topic %s committed %v; truth %v", g, topic, r.committed[g][topic], parts)
					}
				}
				if r.maxMembers[g] != 2 {
					t.Errorf("group %s: at most %d members in a generation, want 2", g, r.maxMembers[g])
				}
			}

			partial := filepath.Join(t.TempDir(), "partial.keylog")
			if err := os.WriteFile(partial, dropSession(t, readFile(t, keylog)), 0o600); err != nil {
				t.Fatal(err)
			}
			r = analyzeTLS(t, "--tls-keylog", partial, pcap)
			if r.count("tls_connections") != conns || r.count("tls_decrypted") != conns-1 || r.count("tls_no_keys") != 1 || r.anomalies["tls"] != 1 {
				t.Errorf("one session missing: capture stats %v, anomalies %v; want 1 of %d not decrypted, reported as TLS", r.capture, r.anomalies, conns)
			}
		})
	}
}

// dropSession removes every line of the key log's first session.
func dropSession(t *testing.T, keylog []byte) []byte {
	lines := strings.Split(string(keylog), "\n")
	random := strings.Fields(lines[0])[1]
	var kept []string
	for _, l := range lines {
		if !strings.Contains(l, random) {
			kept = append(kept, l)
		}
	}
	if len(kept) == len(lines) {
		t.Fatal("no session dropped")
	}
	return []byte(strings.Join(kept, "\n"))
}

// TestTLSKeylogNeverPrinted: no secret of the key log appears in any
// output, a malformed line's included.
func TestTLSKeylogNeverPrinted(t *testing.T) {
	dir := filepath.Join(testdataDir(), "tls")
	keylog := readFile(t, filepath.Join(dir, "tls13.keylog"))
	var secrets []string
	for _, l := range strings.Split(string(keylog), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			secrets = append(secrets, f[2])
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.keylog")
	if err := os.WriteFile(bad, append([]byte("CLIENT_RANDOM zz "+secrets[0]+"\n"), keylog...), 0o600); err != nil {
		t.Fatal(err)
	}
	pcap := filepath.Join(dir, "tls13.pcapng")
	for _, args := range [][]string{{"read", "--json"}, {"read", "--text"}, {"analyze", "--text"}} {
		var out, errb bytes.Buffer
		if code := run(append(args, "--tls-keylog", bad, pcap), &out, &errb); code != 0 {
			t.Fatalf("kwire %v: exit %d: %s", args, code, errb.String())
		}
		for _, s := range secrets {
			if bytes.Contains(out.Bytes(), []byte(s)) || strings.Contains(errb.String(), s) {
				t.Fatalf("kwire %v printed a secret of the key log", args)
			}
		}
	}
}
