package decode

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A response whose request was never captured (sent before the capture
// began, or lost) has only its correlation id to say what it is: a
// response header carries no key or version. Wireshark shows such a frame
// as "Response (Undecoded, Request Missing)". kwire reports it unmatched,
// with its API inferred where the bytes and the requests seen allow it:
// an API and version whose response reads the body and writes it back to
// its exact size, among those the connection's own requests used, else
// among those any request of the capture used, else among every one kmsg
// knows, once per connection for a few small responses (trying them all
// costs ~0.3 ms a response). It is inferred when one API alone fits (the
// highest of its versions that fit, among those seen, said so when
// several do); when several APIs fit, or none, the body is not decoded
// and the anomaly says why. On the 11,732 decoded responses of the
// committed captures, the bytes alone single out the API for 69% of them,
// and the API and version for 27%; taken as unmatched, with the APIs of
// their capture's requests to choose from, 85% get their API and version,
// 1.3% their API with another version that reads them alike, 14% none,
// and none a wrong API.

// apiFit is an API and version.
type apiFit struct{ key, version int16 }

const (
	// maxConnAPIs bounds the APIs and versions remembered per connection.
	maxConnAPIs = 16
	// maxInferBody bounds the responses whose API is inferred at all;
	// maxTryAllBody those tried as every API kmsg knows, at most
	// maxTryAll times per connection.
	maxInferBody  = 1 << 20
	maxTryAllBody = 64 << 10
	maxTryAll     = 4
	// maxInferWork bounds the bytes read in trials per connection: a
	// peer sending responses no request asked for cannot make kwire
	// read each of them hundreds of times.
	maxInferWork = 4 << 20
)

// noteAPI remembers that a request of key and version was seen on cs.
func (d *Decoder) noteAPI(cs *connState, key, version int16) {
	if key < 0 || int(key) >= maxKey || version < 0 || version >= 64 {
		return
	}
	d.seen[key] |= 1 << version
	f := apiFit{key, version}
	for _, a := range cs.apis {
		if a == f {
			return
		}
	}
	if len(cs.apis) < maxConnAPIs {
		cs.apis = append(cs.apis, f)
	}
}

// inferred is what an unmatched response's bytes and the requests seen
// say of its API: key and version (-1 when not inferred), the decoded
// body, and how it was inferred or why not.
type inferred struct {
	key, version int16
	resp         kmsg.Response
	how          string
}

// infer infers the API of a response whose request was not seen, from
// body (the bytes after its correlation id; nil if they were not kept).
func (d *Decoder) infer(cs *connState, body []byte) inferred {
	no := func(why string) inferred { return inferred{key: -1, version: -1, how: why} }
	switch {
	case body == nil:
		return no("its bytes were not kept: API not inferred")
	case len(body) > maxInferBody:
		return no(fmt.Sprintf("larger than %d bytes: API not inferred", maxInferBody))
	}
	var seen []apiFit
	for k, vs := range d.seen {
		for ; vs != 0; vs &= vs - 1 {
			seen = append(seen, apiFit{int16(k), int16(bits.TrailingZeros64(vs))})
		}
	}
	for _, level := range []struct {
		cands []apiFit
		from  string
	}{{cs.apis, "its connection's requests"}, {seen, "the requests of the capture"}} {
		fit, ok := d.fitting(cs, level.cands, body)
		if !ok {
			return no(spent)
		}
		if len(fit) == 0 {
			continue
		}
		if key, ok := oneKey(fit); ok {
			lo, hi := fit[0].version, fit[0].version
			for _, f := range fit {
				lo, hi = min(lo, f.version), max(hi, f.version)
			}
			how := fmt.Sprintf("%s v%d inferred: of the APIs of %s, its response alone reads these bytes", APIName(key), hi, level.from)
			if len(fit) > 1 { // versions of one layout for these bytes: the fields are the same
				how += fmt.Sprintf(" (as %d of its versions from v%d to v%d do, alike: shown as the highest)", len(fit), lo, hi)
			}
			return d.decodeInferred(key, hi, body, how)
		}
		return no(fmt.Sprintf("API not inferred: the responses of %s of %s read these bytes", names(fit), level.from))
	}
	if len(body) > maxTryAllBody || cs.triedAll >= maxTryAll {
		return no("API not inferred: no API of the requests seen reads these bytes")
	}
	cs.triedAll++
	var all []apiFit
	for k := range maxKey {
		if p := d.protos[k]; p != nil {
			for v := int16(0); v <= p.MaxVersion(); v++ {
				all = append(all, apiFit{int16(k), v})
			}
		}
	}
	fit, ok := d.fitting(cs, all, body)
	switch {
	case !ok:
		return no(spent)
	case len(fit) == 1:
		return d.decodeInferred(fit[0].key, fit[0].version, body,
			fmt.Sprintf("%s v%d inferred: the only API and version whose response reads these bytes", APIName(fit[0].key), fit[0].version))
	case len(fit) == 0:
		return no("API not inferred: no API's response reads these bytes")
	}
	return no(fmt.Sprintf("API not inferred: the responses of %s read these bytes", names(fit)))
}

// spent says why an API was not inferred once maxInferWork is spent.
const spent = "API not inferred: enough of this connection's responses were tried"

// fitting returns the APIs and versions of cands whose response reads
// body and writes it back to its exact size; false once the connection
// spent maxInferWork.
func (d *Decoder) fitting(cs *connState, cands []apiFit, body []byte) ([]apiFit, bool) {
	var out []apiFit
	for _, c := range cands {
		if cs.inferWork += len(body); cs.inferWork > maxInferWork {
			return nil, false
		}
		if readsAs(&d.protos, &d.tags, &d.scratch, c.key, c.version, body) != nil {
			out = append(out, c)
		}
	}
	return out, true
}

// readsAs returns body (after a response's correlation id) read as the
// response of key and version, nil unless it reads and writes back to
// its exact size: the header's tagged fields for the flexible versions
// (KIP-482; never for ApiVersions, KIP-511), then the body. The response
// aliases body.
func readsAs(protos *[maxKey]kmsg.Request, tags *kbin.Reader, scratch *[]byte, key, version int16, body []byte) kmsg.Response {
	proto := keyKnown(protos, key)
	if proto == nil || version < 0 || version > proto.MaxVersion() {
		return nil
	}
	if isFlexibleResponse(proto, key, version) {
		*tags = kbin.Reader{Src: body}
		kmsg.SkipTags(tags)
		if !tags.Ok() {
			return nil
		}
		body = tags.Src
	}
	resp := proto.ResponseKind()
	resp.SetVersion(version)
	if resp.ReadFrom(body) != nil {
		return nil
	}
	enc := resp.AppendTo((*scratch)[:0])
	*scratch = enc[:0]
	if len(enc) != len(body) {
		return nil
	}
	return resp
}

// decodeInferred decodes body as the response of key and version, from a
// copy of its own: the anomaly may outlive the frame.
func (d *Decoder) decodeInferred(key, version int16, body []byte, how string) inferred {
	resp := readsAs(&d.protos, &d.tags, &d.scratch, key, version, append([]byte(nil), body...))
	if resp == nil { // cannot be: it fitted
		return inferred{key: -1, version: -1, how: how}
	}
	redactResponse(resp)
	return inferred{key: key, version: version, resp: resp, how: how}
}

// oneKey reports whether every fit is of one API, and which.
func oneKey(fit []apiFit) (int16, bool) {
	for _, f := range fit[1:] {
		if f.key != fit[0].key {
			return 0, false
		}
	}
	return fit[0].key, true
}

// names lists the APIs of fit, each once with its versions, at most 6.
func names(fit []apiFit) string {
	fit = slices.Clone(fit)
	slices.SortFunc(fit, func(a, b apiFit) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.version, b.version)) })
	var out []string
	for i := 0; i < len(fit); {
		j := i
		var vs []string
		for ; j < len(fit) && fit[j].key == fit[i].key; j++ {
			vs = append(vs, fmt.Sprint(fit[j].version))
		}
		if len(out) == 6 {
			out = append(out, "...")
			break
		}
		out = append(out, fmt.Sprintf("%s v%s", APIName(fit[i].key), strings.Join(vs, ",")))
		i = j
	}
	return strings.Join(out, ", ")
}

// APIName is kmsg's name for key, or "Unknown(key)".
func APIName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return fmt.Sprintf("Unknown(%d)", key)
}
