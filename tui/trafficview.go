package tui

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// trafficView is the Traffic view: per API, client and broker.
type trafficView struct {
	pane    *textPane
	filter  string
	fr      *Frame
	rates   *rateWindow
	dropped func() int64
}

func newTrafficView() *trafficView {
	v := &trafficView{}
	v.pane = newTextPane(v.render)
	return v
}

func (v *trafficView) update(fr *Frame, rates *rateWindow) {
	v.fr, v.rates = fr, rates
	v.pane.invalidate()
}

func (v *trafficView) setFilter(s string) {
	v.filter = s
	v.pane.invalidate()
}

func (v *trafficView) matches(ss ...string) bool {
	if v.filter == "" {
		return true
	}
	f := strings.ToLower(v.filter)
	for _, s := range ss {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

// apiName is the API's name, "unknown" for keys kmsg does not know.
func apiName(key int16) string {
	if key < 0 {
		return "unknown"
	}
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return fmt.Sprintf("key %d", key)
}

func (v *trafficView) render(width int) string {
	if v.fr == nil {
		return "no traffic yet\n"
	}
	cur, base, secs := v.rates.span()
	var b strings.Builder
	window := "no rates yet"
	if secs > 0 {
		window = fmt.Sprintf("rates over the last %s of capture time", dur(cur.at.Sub(base.at)))
	}
	b.WriteString("[::u]REQUESTS BY API[::-] ")
	para(&b, width-16, window+"; latency from the request's last byte to the response's first")
	baseAPI := map[int16]*APIStats{}
	for i := range base.traffic.APIs {
		baseAPI[base.traffic.APIs[i].Key] = &base.traffic.APIs[i]
	}
	var rows [][]cell
	for i := range cur.traffic.APIs {
		a := &cur.traffic.APIs[i]
		name := apiName(a.Key)
		if !v.matches(name) {
			continue
		}
		var was APIStats
		if p := baseAPI[a.Key]; p != nil {
			was = *p
		}
		win := a.Latency.sub(&was.Latency)
		q := func(p float64) string {
			if d, ok := win.Quantile(p); ok {
				return dur(d)
			}
			return "-"
		}
		errs := cell{text: count(a.Errors)}
		if a.Errors > 0 {
			errs.color = "red"
		}
		rows = append(rows, []cell{c(name), c(rate(perSec(a.Requests, was.Requests, secs))), c(rate(perSec(a.Errors, was.Errors, secs))),
			c(q(0.5)), c(q(0.9)), c(q(0.99)), c(count(a.Requests)), errs, c(count(a.Unanswered))})
	}
	writeTable(&b, width, []col{{title: "API", shrink: 10}, {title: "REQ/S", right: true}, {title: "ERR/S", right: true},
		{title: "P50", right: true}, {title: "P90", right: true}, {title: "P99", right: true},
		{title: "REQUESTS", right: true}, {title: "ERRORS", right: true}, {title: "NO RESP", right: true}}, rows)

	baseCl := map[clientKey]*ClientStats{}
	for i := range base.traffic.Clients {
		cl := &base.traffic.Clients[i]
		baseCl[clientKey{cl.Host, cl.ClientID}] = cl
	}
	fmt.Fprintf(&b, "\n[::u]CLIENTS[::-] (host, client id)\n")
	rows = rows[:0]
	for i := range cur.traffic.Clients {
		cl := &cur.traffic.Clients[i]
		host, id := hostText(cl.Host), cl.ClientID
		if cl.Other {
			host, id = "(others)", "(beyond the cap)"
		}
		if !v.matches(host, id) {
			continue
		}
		var was int64
		if p := baseCl[clientKey{cl.Host, cl.ClientID}]; p != nil && !cl.Other {
			was = p.Requests
		}
		rows = append(rows, []cell{c(host), c(orDash(id)), c(rate(perSec(cl.Requests, was, secs))), c(count(cl.Requests)),
			c(count(cl.Errors)), c(bytesText(cl.Bytes)), c(count(cl.Conns)), c(clock(cl.Last))})
	}
	writeTable(&b, width, []col{{title: "HOST", shrink: 9}, {title: "CLIENT ID", shrink: 10}, {title: "REQ/S", right: true},
		{title: "REQUESTS", right: true}, {title: "ERRORS", right: true}, {title: "BYTES", right: true}, {title: "CONNS", right: true},
		{title: "LAST"}}, rows)

	baseBr := map[netip.AddrPort]*BrokerStats{}
	for i := range base.traffic.Brokers {
		baseBr[base.traffic.Brokers[i].Addr] = &base.traffic.Brokers[i]
	}
	fmt.Fprintf(&b, "\n[::u]BROKERS[::-] (server side of the connections)\n")
	rows = rows[:0]
	for i := range cur.traffic.Brokers {
		br := &cur.traffic.Brokers[i]
		addr := br.Addr.String()
		if br.Other {
			addr = "(others)"
		}
		if !v.matches(addr) {
			continue
		}
		var was int64
		if p := baseBr[br.Addr]; p != nil && !br.Other {
			was = p.Requests
		}
		rows = append(rows, []cell{c(addr), c(count(br.Conns)), c(rate(perSec(br.Requests, was, secs))), c(count(br.Requests)),
			c(count(br.Errors)), c(bytesText(br.Bytes))})
	}
	writeTable(&b, width, []col{{title: "BROKER", shrink: 12}, {title: "CONNS", right: true}, {title: "REQ/S", right: true},
		{title: "REQUESTS", right: true}, {title: "ERRORS", right: true}, {title: "BYTES", right: true}}, rows)
	if v.dropped != nil {
		fmt.Fprintf(&b, "\nscreen: frame %d, %d frames dropped (the UI took only the latest)\n", v.fr.Seq, v.dropped())
	}
	return b.String()
}

func hostText(a netip.Addr) string {
	if !a.IsValid() {
		return "-"
	}
	return a.String()
}
