package tui

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

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
	v.apis(&b, width, cur.traffic, base.traffic, secs, cur.at.Sub(base.at))
	v.clients(&b, width, cur.traffic, base.traffic, secs)
	v.brokers(&b, width, cur.traffic, base.traffic, secs)
	if v.dropped != nil {
		fmt.Fprintf(&b, "\nscreen: frame %d, %d frames dropped (the UI took only the latest)\n", v.fr.Seq, v.dropped())
	}
	return b.String()
}

// apis writes the per API table: rates and latency over the window
// (now minus base, over secs of capture time), totals since the start.
func (v *trafficView) apis(b *strings.Builder, width int, now, base *Traffic, secs float64, window time.Duration) {
	what := "no rates yet"
	if secs > 0 {
		what = fmt.Sprintf("rates over the last %s of capture time", dur(window))
	}
	b.WriteString("[::u]REQUESTS BY API[::-] ")
	para(b, width-16, what+"; latency from the request's last byte to the response's first; "+
		"a Fetch's without its long-poll wait for records, WAIT: the median wait, of the longest asked for")
	was := map[int16]*APIStats{}
	for i := range base.APIs {
		was[base.APIs[i].Key] = &base.APIs[i]
	}
	var rows [][]cell
	for i := range now.APIs {
		a := &now.APIs[i]
		name := apiName(a.Key)
		if !v.matches(name) {
			continue
		}
		var old APIStats
		if p := was[a.Key]; p != nil {
			old = *p
		}
		win := a.Latency.sub(&old.Latency)
		q := func(p float64) cell {
			if d, ok := win.Quantile(p); ok {
				return c(dur(d))
			}
			return c("-")
		}
		wait := c("-")
		waits := a.Wait.sub(&old.Wait)
		if d, ok := waits.Quantile(0.5); ok {
			wait = c(dur(d) + "/" + dur(time.Duration(a.MaxWaitMillis)*time.Millisecond))
		}
		errs := cell{text: count(a.Errors)}
		if a.Errors > 0 {
			errs.color = "red"
		}
		rows = append(rows, []cell{c(name), c(rate(perSec(a.Requests, old.Requests, secs))), c(rate(perSec(a.Errors, old.Errors, secs))),
			q(0.5), q(0.9), q(0.99), wait, c(count(a.Requests)), errs, c(count(a.Unanswered))})
	}
	writeTable(b, width, []col{{title: "API", shrink: 10}, {title: "REQ/S", right: true}, {title: "ERR/S", right: true},
		{title: "P50", right: true}, {title: "P90", right: true}, {title: "P99", right: true}, {title: "WAIT", right: true},
		{title: "REQUESTS", right: true}, {title: "ERRORS", right: true}, {title: "NO RESP", right: true}}, rows)
}

// clients writes the per client (host, client id) table.
func (v *trafficView) clients(b *strings.Builder, width int, now, base *Traffic, secs float64) {
	was := map[clientKey]int64{}
	for i := range base.Clients {
		cl := &base.Clients[i]
		was[clientKey{cl.Host, cl.ClientID}] = cl.Requests
	}
	b.WriteString("\n[::u]CLIENTS[::-] (host, client id)\n")
	var rows [][]cell
	for i := range now.Clients {
		cl := &now.Clients[i]
		host, id := hostText(cl.Host), cl.ClientID
		old := was[clientKey{cl.Host, cl.ClientID}]
		if cl.Other {
			host, id, old = "(others)", "(beyond the cap)", 0
		}
		if !v.matches(host, id) {
			continue
		}
		proc := "-"
		if cl.PID != 0 || cl.Comm != "" {
			proc = fmt.Sprintf("%d/%s", cl.PID, cl.Comm)
		}
		rows = append(rows, []cell{c(host), c(orDash(id)), c(rate(perSec(cl.Requests, old, secs))), c(count(cl.Requests)),
			c(count(cl.Errors)), c(bytesText(cl.Bytes)), c(count(cl.Conns)), c(clock(cl.Last)), c(proc)})
	}
	writeTable(b, width, []col{{title: "HOST", shrink: 9}, {title: "CLIENT ID", shrink: 10}, {title: "REQ/S", right: true},
		{title: "REQUESTS", right: true}, {title: "ERRORS", right: true}, {title: "BYTES", right: true}, {title: "CONNS", right: true},
		{title: "LAST"}, {title: "PID/COMM", shrink: 3}}, rows)
}

// brokers writes the per broker (server address) table.
func (v *trafficView) brokers(b *strings.Builder, width int, now, base *Traffic, secs float64) {
	was := map[netip.AddrPort]int64{}
	for i := range base.Brokers {
		was[base.Brokers[i].Addr] = base.Brokers[i].Requests
	}
	b.WriteString("\n[::u]BROKERS[::-] (server side of the connections)\n")
	var rows [][]cell
	for i := range now.Brokers {
		br := &now.Brokers[i]
		addr, old := br.Addr.String(), was[br.Addr]
		if br.Other {
			addr, old = "(others)", 0
		}
		if !v.matches(addr) {
			continue
		}
		rows = append(rows, []cell{c(addr), c(count(br.Conns)), c(rate(perSec(br.Requests, old, secs))), c(count(br.Requests)),
			c(count(br.Errors)), c(bytesText(br.Bytes))})
	}
	writeTable(b, width, []col{{title: "BROKER", shrink: 12}, {title: "CONNS", right: true}, {title: "REQ/S", right: true},
		{title: "REQUESTS", right: true}, {title: "ERRORS", right: true}, {title: "BYTES", right: true}}, rows)
}

func hostText(a netip.Addr) string {
	if !a.IsValid() {
		return "-"
	}
	return a.String()
}
