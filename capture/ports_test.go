package capture

import (
	"flag"
	"testing"
)

func TestParsePorts(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string // String() of the result
		in1     []uint16
		out     []uint16
		wantErr string
	}{
		{name: "one", in: "9092", want: "9092", in1: []uint16{9092}, out: []uint16{9091, 9093, 0}},
		{name: "list", in: "9092,9093", want: "9092-9093", in1: []uint16{9092, 9093}, out: []uint16{9094}},
		{name: "range", in: "19092-19094", want: "19092-19094", in1: []uint16{19092, 19093, 19094}, out: []uint16{19091, 19095}},
		{name: "mixed with spaces", in: " 9092 , 19092-19094,29092", want: "9092,19092-19094,29092", in1: []uint16{9092, 19093, 29092}, out: []uint16{9093}},
		{name: "overlapping", in: "10-20,15-25,5", want: "5,10-25", in1: []uint16{5, 25}, out: []uint16{6, 26}},
		{name: "extremes", in: "1,65535", want: "1,65535", in1: []uint16{1, 65535}, out: []uint16{0, 2, 65534}},
		{name: "whole range", in: "1-65535", want: "1-65535", in1: []uint16{1, 40000, 65535}, out: []uint16{0}},
		{name: "backwards range", in: "9-3", wantErr: "--port: bad range 9-3: want LOW-HIGH with LOW <= HIGH"},
		{name: "not a number", in: "kafka", wantErr: `--port: bad port "kafka": want a number from 1 to 65535`},
		{name: "zero", in: "0", wantErr: `--port: bad port "0": want a number from 1 to 65535`},
		{name: "too big", in: "9092-70000", wantErr: `--port: bad port "70000": want a number from 1 to 65535`},
		{name: "empty item", in: "9092,,9093", wantErr: `--port: empty item in "9092,,9093": want ports separated by single commas`},
		{name: "empty", in: "", wantErr: "--port: empty list: want e.g. 9092, 9092,9093 or 19092-19094"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePorts(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParsePorts(%q) error (-want +got):\n- %s\n+ %v", tt.in, tt.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePorts(%q): %v", tt.in, err)
			}
			if got := p.String(); got != tt.want {
				t.Errorf("String() (-want +got):\n- %s\n+ %s", tt.want, got)
			}
			for _, port := range tt.in1 {
				if !p.Contains(port) {
					t.Errorf("Contains(%d) = false, want true", port)
				}
			}
			for _, port := range tt.out {
				if p.Contains(port) {
					t.Errorf("Contains(%d) = true, want false", port)
				}
			}
			back, err := ParsePorts(p.String())
			if err != nil || back != p {
				t.Errorf("ParsePorts(String()) does not round-trip: %q, %v", back.String(), err)
			}
		})
	}
}

func TestPortsFlag(t *testing.T) {
	var p Ports
	fs := flag.NewFlagSet("kwire", flag.ContinueOnError)
	fs.Var(&p, "port", "broker ports")
	if err := fs.Parse([]string{"--port", "9092", "--port", "19092-19093"}); err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), "9092,19092-19093"; got != want {
		t.Errorf("after two --port flags (-want +got):\n- %s\n+ %s", want, got)
	}
	if p.Empty() || (&Ports{}).Empty() == false {
		t.Errorf("Empty() wrong: set %v, zero %v", p.Empty(), (&Ports{}).Empty())
	}
}
