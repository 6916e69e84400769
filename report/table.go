package report

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// table is a list of objects shown as rows, columns named by their NDJSON
// field names (docs/schema.md says what each means).
type table struct {
	Head []string
	Rows [][]string
}

// maxCell is the longest cell text; longer ones (lists of offsets...) are
// cut, the NDJSON summary has them whole.
const maxCell = 160

// jsonTable makes a table of rows (a slice of structs), their fields as
// encoding/json writes them, in their order, less those named in skip.
func jsonTable(rows any, skip ...string) table {
	var raws []json.RawMessage
	if b, err := json.Marshal(rows); err != nil || json.Unmarshal(b, &raws) != nil {
		return table{}
	}
	var t table
	col := map[string]int{}
	for _, s := range skip {
		col[s] = -1
	}
	var cells []map[int]string
	for _, raw := range raws {
		row := map[int]string{}
		for _, f := range fields(raw) {
			i, ok := col[f.key]
			if !ok {
				i = len(t.Head)
				col[f.key] = i
				t.Head = append(t.Head, f.key)
			}
			if i >= 0 {
				row[i] = f.value
			}
		}
		cells = append(cells, row)
	}
	for _, row := range cells {
		r := make([]string, len(t.Head))
		for i := range r {
			if r[i] = row[i]; r[i] == "" {
				r[i] = "-"
			}
		}
		t.Rows = append(t.Rows, r)
	}
	return t
}

type field struct{ key, value string }

// fields lists an object's fields in order, each value as text: strings
// bare, null as "", anything else as compact JSON.
func fields(raw json.RawMessage) []field {
	var out []field
	eachField(raw, func(key string, v json.RawMessage) { out = append(out, field{key, cellText(v)}) })
	return out
}

// eachField calls fn with each field of a JSON object, in order.
func eachField(raw json.RawMessage, fn func(key string, v json.RawMessage)) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return
		}
		fn(key, v)
	}
}

func cellText(v json.RawMessage) string {
	var s string
	switch {
	case string(v) == "null":
		return ""
	case json.Unmarshal(v, &s) == nil:
	default:
		s = string(v)
	}
	if len(s) > maxCell {
		s = strings.ToValidUTF8(s[:maxCell], "") + "…"
	}
	return s
}

// flatFields lists the fields of v (a struct) as encoding/json writes
// them, objects inside it flattened ("live.kernel_drops"), less those
// named in skip and those whose value is zero, false, empty or null.
func flatFields(v any, skip ...string) []field {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out []field
	var walk func(prefix string, raw json.RawMessage)
	walk = func(prefix string, raw json.RawMessage) {
		eachField(raw, func(key string, v json.RawMessage) {
			key = prefix + key
			switch {
			case slices.Contains(skip, key):
			case len(v) > 0 && v[0] == '{':
				walk(key+".", v)
			case !zeroJSON(v):
				out = append(out, field{key, cellText(v)})
			}
		})
	}
	walk("", b)
	return out
}

func zeroJSON(v json.RawMessage) bool {
	switch string(v) {
	case "0", "false", "null", `""`, "[]", "{}":
		return true
	}
	return false
}
