package capture

import (
	"fmt"
	"strconv"
	"strings"
)

// Ports is a set of TCP ports: the broker ports a user names with --port.
// The zero value is the empty set. Membership is a bitmap lookup, so
// Contains costs the same for one port or for all of them.
//
// *Ports implements flag.Value: each Set adds to the set, so a repeated
// flag (--port 9092 --port 19092-19094) accumulates.
type Ports struct {
	bits [65536 / 64]uint64
}

// ParsePorts parses a comma-separated list of ports and LOW-HIGH ranges,
// such as "9092", "9092,9093", "19092-19094" or "9092,19092-19094".
// Port 0 is not a TCP port and is rejected.
func ParsePorts(s string) (Ports, error) {
	var p Ports
	err := p.Set(s)
	return p, err
}

// Set adds the ports listed in s (the syntax of ParsePorts) to p. On error
// p is left unchanged.
func (p *Ports) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("--port: empty list: want e.g. 9092, 9092,9093 or 19092-19094")
	}
	add := *p
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return fmt.Errorf("--port: empty item in %q: want ports separated by single commas", s)
		}
		lo, hi, err := parsePortItem(item)
		if err != nil {
			return err
		}
		for port := lo; ; port++ {
			add.add(uint16(port))
			if port == hi {
				break
			}
		}
	}
	*p = add
	return nil
}

// parsePortItem parses "N" or "LOW-HIGH".
func parsePortItem(item string) (lo, hi int, err error) {
	l, h, isRange := strings.Cut(item, "-")
	if lo, err = parsePort(strings.TrimSpace(l)); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parsePort(strings.TrimSpace(h)); err != nil {
		return 0, 0, err
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("--port: bad range %s: want LOW-HIGH with LOW <= HIGH", item)
	}
	return lo, hi, nil
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("--port: bad port %q: want a number from 1 to 65535", s)
	}
	return n, nil
}

func (p *Ports) add(port uint16) { p.bits[port>>6] |= 1 << (port & 63) }

// Contains reports whether port is in the set.
func (p *Ports) Contains(port uint16) bool {
	return p.bits[port>>6]&(1<<(port&63)) != 0
}

// Empty reports whether the set has no ports.
func (p *Ports) Empty() bool {
	for _, w := range p.bits {
		if w != 0 {
			return false
		}
	}
	return true
}

// String returns the set in canonical form: ascending, with runs of
// consecutive ports merged into ranges ("9092,19092-19094"). ParsePorts of
// the result gives back the same set; the empty set is "".
func (p *Ports) String() string {
	var b strings.Builder
	for port := 0; port < 65536; {
		if !p.Contains(uint16(port)) {
			if p.bits[port>>6] == 0 {
				port = (port | 63) + 1 // skip an empty word
			} else {
				port++
			}
			continue
		}
		lo := port
		for port < 65536 && p.Contains(uint16(port)) {
			port++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(lo))
		if port-1 > lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(port - 1))
		}
	}
	return b.String()
}
