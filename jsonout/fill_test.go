package jsonout

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// The hand-written writers (commitLine, appendExchange) must write what
// encoding/json writes for the same value. Tests on captures only see the
// fields that the captures happen to set, so a field added to a type
// later (with omitempty, say) can be silently left out of the fast line
// while every capture test still passes. The tests below fill EVERY
// exported field of the types the fast writers read, by reflection, so
// that a new field is covered the day it is added.

// filler sets every exported field of a value: numbers to distinct
// non-zero values, strings to awkward text, pointers allocated, slices
// two elements long. skip names fields to leave alone (by name, at any
// depth).
type filler struct {
	n    int
	skip map[string]bool
}

func (f *filler) next() int { f.n++; return f.n }

func (f *filler) fill(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		v.SetInt(int64(f.next()))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		v.SetUint(uint64(f.next()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.next()) + 0.5)
	case reflect.String:
		v.SetString(awkward[f.next()%len(awkward)] + fmt.Sprint(f.n))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(fmt.Sprintf("bytes %d", f.next())))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			f.fill(v.Index(i), depth+1)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1700000000, int64(f.next())*1000).UTC()))
			return
		}
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() || f.skip[sf.Name] {
				continue
			}
			f.fill(v.Field(i), depth+1)
		}
	}
}

// leaves calls visit once per settable leaf field of v (depth-first),
// with v restored after each call: the test zeroes one field at a time,
// so that omitempty fields are seen both present and absent.
func leaves(v reflect.Value, skip map[string]bool, visit func(path string)) {
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[time.Time]() {
				break
			}
			for i := range v.NumField() {
				sf := v.Type().Field(i)
				if sf.IsExported() && !skip[sf.Name] {
					walk(v.Field(i), path+"."+sf.Name)
				}
			}
			return
		case reflect.Pointer:
			if !v.IsNil() {
				old := v.Elem().Interface()
				v.Set(reflect.Zero(v.Type()))
				visit(path + " (nil)")
				p := reflect.New(v.Type().Elem())
				p.Elem().Set(reflect.ValueOf(old))
				v.Set(p)
				walk(v.Elem(), path)
			}
			return
		case reflect.Slice:
			if !v.IsNil() && v.Type().Elem().Kind() != reflect.Uint8 {
				old := reflect.ValueOf(v.Interface())
				v.Set(reflect.Zero(v.Type()))
				visit(path + " (nil)")
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
				visit(path + " (empty)")
				v.Set(old)
				for i := range v.Len() {
					walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
				}
				return
			}
		}
		old := reflect.ValueOf(v.Interface())
		v.Set(reflect.Zero(v.Type()))
		visit(path + " (zero)")
		v.Set(old)
	}
	walk(v, "")
}

// TestFastCommitEveryField fills every field of a CommitEvent, then zeroes
// them one at a time, and requires commitLine to write what encoding/json
// writes each time.
func TestFastCommitEveryField(t *testing.T) {
	var e correlate.CommitEvent
	f := &filler{}
	f.fill(reflect.ValueOf(&e).Elem(), 0)
	check := func(what string) {
		t.Helper()
		want := commitSlow(t, &e)
		got := append(commitLine(nil, &e, &commitCache{}), '\n')
		if !bytes.Equal(got, want) {
			t.Errorf("commit line, %s:\n fast      %s encoding/json %s", what, got, want)
		}
	}
	check("every field set")
	leaves(reflect.ValueOf(&e).Elem(), nil, check)
}

// fastTypes are the kmsg messages appendExchange writes, request and
// response of each fast API (fastKeys).
func fastTypes() []struct {
	key  int16
	req  kmsg.Request
	resp kmsg.Response
} {
	var out []struct {
		key  int16
		req  kmsg.Request
		resp kmsg.Response
	}
	for _, key := range fastKeys {
		req := kmsg.RequestForKey(key)
		out = append(out, struct {
			key  int16
			req  kmsg.Request
			resp kmsg.Response
		}{key, req, req.ResponseKind()})
	}
	return out
}

// TestFastExchangeEveryField fills every field of each fast API's request
// and response, at every version, then zeroes them one at a time, and
// requires the fast exchange line to be the reference's each time.
// (Records are left as garbage bytes: both ways must say the same about
// them.)
func TestFastExchangeEveryField(t *testing.T) {
	skip := map[string]bool{"Version": true, "UnknownTags": true}
	lines := 0
	for _, ty := range fastTypes() {
		for v := int16(0); v <= ty.req.MaxVersion(); v++ {
			req := kmsg.RequestForKey(ty.key)
			resp := req.ResponseKind()
			f := &filler{skip: skip}
			f.fill(reflect.ValueOf(req).Elem(), 0)
			f.fill(reflect.ValueOf(resp).Elem(), 0)
			req.SetVersion(v)
			resp.SetVersion(v)
			e := &decode.Exchange{Key: ty.key, Version: v, CorrelationID: 7, ClientID: "client <&>",
				ReqTime: time.Unix(1700000000, 1000).UTC(), RespTime: time.Unix(1700000000, 9000).UTC(),
				ReqSize: 100, RespSize: 200, Req: req, Resp: resp, Response: decode.ResponseSeen, Conn: fuzzConn(0x20)}
			name := fmt.Sprintf("%s v%d", kmsg.NameForKey(ty.key), v)
			check := func(what string) {
				t.Helper()
				w := newTwoWays(t)
				w.Exchange(e)
				if w.fastN != 1 {
					t.Fatalf("%s %s: not written the fast way", name, what)
				}
				lines++
			}
			check("every field set")
			leaves(reflect.ValueOf(req).Elem(), skip, func(p string) { check("request" + p) })
			leaves(reflect.ValueOf(resp).Elem(), skip, func(p string) { check("response" + p) })
		}
	}
	t.Logf("%d exchange lines compared", lines)
}
