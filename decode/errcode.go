package decode

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrorCode returns the first non-zero error code in a response (top level
// first, then nested topics, partitions, members... in field order), or 0.
func ErrorCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case nil:
		return 0
	case *kmsg.FetchResponse: // hot path: no reflection
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if c := r.Topics[i].Partitions[j].ErrorCode; c != 0 {
					return c
				}
			}
		}
		return 0
	case *kmsg.OffsetCommitResponse: // as the reflection finds it, without
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if c := r.Topics[i].Partitions[j].ErrorCode; c != 0 {
					return c
				}
			}
		}
		return 0
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if c := r.Topics[i].Partitions[j].ErrorCode; c != 0 {
					return c
				}
			}
		}
		return 0
	}
	return errorCode(reflect.ValueOf(resp).Elem(), 0)
}

var int16Type = reflect.TypeOf(int16(0))

func errorCode(v reflect.Value, depth int) int16 {
	if depth > 6 {
		return 0
	}
	t := v.Type()
	if f, ok := t.FieldByName("ErrorCode"); ok && f.Type == int16Type && len(f.Index) == 1 {
		if c := int16(v.FieldByIndex(f.Index).Int()); c != 0 {
			return c
		}
	}
	for i := 0; i < t.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Slice:
			if f.Type().Elem().Kind() != reflect.Struct {
				continue
			}
			for j := 0; j < f.Len(); j++ {
				if c := errorCode(f.Index(j), depth+1); c != 0 {
					return c
				}
			}
		case reflect.Struct:
			if c := errorCode(f, depth+1); c != 0 {
				return c
			}
		}
	}
	return 0
}
