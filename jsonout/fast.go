package jsonout

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/kwire/kwire/correlate"
)

// Commit events are most of analyze's output on a busy capture (one per
// partition committed: 145,586 lines on the 1 GB benchmark capture), and
// encoding/json's reflection was a sixth of analyze's time. They are
// written by hand here, byte for byte as encoding/json writes them (the
// goldens and TestFastCommit hold it to that).

// commitCache keeps the text of the last commit line's time and of its
// strings that stay the same for the partitions of one commit (and often
// for a member's next commits): escaping them byte by byte was a fifth of
// the time spent writing commit lines.
type commitCache struct {
	ts                                        tsCache
	group, member, client, host, conn, broker escaped
}

// commitLine appends the whole "type":"commit" line of e.
func commitLine(b []byte, e *correlate.CommitEvent, c *commitCache) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, SchemaVersion, 10)
	b = append(b, `,"type":"commit","ts":"`...)
	b = c.ts.append(b, e.Time())
	b = append(b, `","ts_ms":`...)
	b = strconv.AppendInt(b, e.Time().UnixMilli(), 10)
	b = append(b, `,"group":`...)
	b = c.group.append(b, e.Group)
	b = append(b, `,"member_id":`...)
	b = c.member.append(b, e.MemberID)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, int64(e.Generation), 10)
	b = append(b, `,"topic":`...)
	b = appendString(b, e.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(e.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, e.Offset, 10)
	b = append(b, `,"metadata":`...)
	if e.Metadata == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, *e.Metadata)
	}
	b = append(b, `,"error_code":`...)
	b = strconv.AppendInt(b, int64(e.ErrorCode), 10)
	if e.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, e.Error)
	}
	b = append(b, `,"outcome":`...)
	b = appendString(b, e.Outcome)
	b = append(b, `,"client_id":`...)
	b = c.client.append(b, e.ClientID)
	b = append(b, `,"client_host":`...)
	b = c.host.append(b, e.ClientHost)
	b = append(b, `,"conn":{"id":`...)
	b = strconv.AppendUint(b, e.Conn.ID, 10)
	b = append(b, `,"client":`...)
	b = c.conn.append(b, e.Conn.Client)
	b = append(b, `,"broker":`...)
	b = c.broker.append(b, e.Conn.Broker)
	if e.Conn.PID != 0 {
		b = append(b, `,"pid":`...)
		b = strconv.AppendUint(b, uint64(e.Conn.PID), 10)
	}
	if e.Conn.Comm != "" {
		b = append(b, `,"comm":`...)
		b = appendString(b, e.Conn.Comm)
	}
	return append(b, "}}"...)
}

// escaped is a string and its JSON text (appendString).
type escaped struct {
	s    string
	text []byte
}

func (c *escaped) append(b []byte, s string) []byte {
	if c.text == nil || s != c.s {
		c.s, c.text = s, appendString(c.text[:0], s)
	}
	return append(b, c.text...)
}

// tsCache is a time and its text in TimeFormat (UTC).
type tsCache struct {
	t    time.Time
	text []byte
}

func (c *tsCache) append(b []byte, t time.Time) []byte {
	switch {
	case c.text != nil && t.Equal(c.t):
	case c.text != nil && t.Unix() == c.t.Unix():
		// The same second: only the microseconds differ, the six digits
		// before the closing "Z" (TimeFormat truncates, as this does).
		c.t = t
		us := t.Nanosecond() / 1000
		for i := len(c.text) - 2; i >= len(c.text)-7; i-- {
			c.text[i] = byte('0' + us%10)
			us /= 10
		}
	default:
		c.t, c.text = t, t.UTC().AppendFormat(c.text[:0], TimeFormat)
	}
	return append(b, c.text...)
}

// plainASCII[c] is set for the ASCII bytes appendString copies as they
// are; plainASCIINoHTML[c] for those appendStringNoHTML does.
var plainASCII, plainASCIINoHTML = func() (t, noHTML [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		noHTML[c] = c != '"' && c != '\\'
		t[c] = noHTML[c] && c != '<' && c != '>' && c != '&'
	}
	return t, noHTML
}()

// appendString appends s as a JSON string as json.Marshal writes it: HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte { return appendJSONString(b, s, &plainASCII) }

// appendStringNoHTML appends s as a JSON string as a json.Encoder with
// SetEscapeHTML(false) writes it (exchange lines): as appendString, but
// '<', '>' and '&' as they are.
func appendStringNoHTML(b []byte, s string) []byte {
	return appendJSONString(b, s, &plainASCIINoHTML)
}

func appendJSONString(b []byte, s string, plain *[utf8.RuneSelf]bool) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(append(b, s[start:]...), '"')
	return b
}
