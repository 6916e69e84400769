package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
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

// TestTLSKeylog analyses the TLS captures with --tls-keylog: kfake with
// kfake.TLS and kgo clients writing their key log (TLS 1.3 with the suite
// Go picks, AES-128-GCM; TLS 1.2 with AES-GCM and ChaCha20-Poly1305), and
// kcat (OpenSSL) held to TLS 1.3's AES-256-GCM or ChaCha20-Poly1305, with
// kfake's server writing the key log. Every connection negotiated the
// case's suites (read from the ServerHellos in the capture, so a capture
// that fell back to another suite fails), every connection is decrypted,
// every request kfake handled is decoded, the group's commits are the
// truth's, and no TLS anomaly is left. With a key log missing one session,
// that connection alone is counted tls_no_keys and reported as TLS.
func TestTLSKeylog(t *testing.T) {
	dir := filepath.Join(testdataDir(), "tls")
	for _, tc := range []struct {
		name    string
		suites  []uint16 // every suite the ServerHellos name, each at least once
		members int      // the most members of a generation of each group
	}{
		{"tls13", []uint16{0x1301}, 2},         // TLS_AES_128_GCM_SHA256
		{"tls12", []uint16{0xc02b, 0xcca9}, 2}, // ECDHE-ECDSA-AES128-GCM-SHA256, ECDHE-ECDSA-CHACHA20-POLY1305
		{"tls13_aes256", []uint16{0x1302}, 1},  // TLS_AES_256_GCM_SHA384
		{"tls13_chacha", []uint16{0x1303}, 1},  // TLS_CHACHA20_POLY1305_SHA256
	} {
		name := tc.name
		t.Run(name, func(t *testing.T) {
			var tr tlsTruth
			if err := json.Unmarshal(readFile(t, filepath.Join(dir, name+".truth.json")), &tr); err != nil {
				t.Fatal(err)
			}
			pcap, keylog := filepath.Join(dir, name+".pcapng"), filepath.Join(dir, name+".keylog")
			conns := len(tr.Frames)
			seen := serverHelloSuites(t, readFile(t, pcap))
			if len(seen) != conns {
				t.Errorf("%d ServerHellos in the capture, %d connections", len(seen), conns)
			}
			for _, s := range seen {
				if !slices.Contains(tc.suites, s) {
					t.Errorf("a connection negotiated suite %#04x; want one of %#04x", s, tc.suites)
				}
			}
			for _, s := range tc.suites {
				if !slices.Contains(seen, s) {
					t.Errorf("no connection negotiated suite %#04x (suites %#04x)", s, seen)
				}
			}
			r := analyzeTLS(t, "--tls-keylog", keylog, pcap)
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
				if r.maxMembers[g] != tc.members {
					t.Errorf("group %s: at most %d members in a generation, want %d", g, r.maxMembers[g], tc.members)
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

// serverHelloSuites returns the cipher suite of every TLS 1.2 or 1.3
// ServerHello in a capture file: each is the start of a connection's first
// server record, in one packet (the captures' MSS is far larger), so the
// file's bytes are scanned for a handshake record (0x16 0x0303) holding a
// ServerHello (type 2, legacy_version 0x0303), not parsed as packets.
func serverHelloSuites(t *testing.T, file []byte) []uint16 {
	t.Helper()
	var suites []uint16
	for i := 0; i+11+32+1 < len(file); i++ {
		b := file[i:]
		if b[0] != 0x16 || b[1] != 3 || b[2] != 3 || b[5] != 2 || b[9] != 3 || b[10] != 3 {
			continue
		}
		sid := 11 + 32
		at := sid + 1 + int(b[sid])
		if at+2 > len(b) || int(b[3])<<8|int(b[4]) < at-5+2 {
			continue
		}
		suites = append(suites, uint16(b[at])<<8|uint16(b[at+1]))
	}
	return suites
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
