package correlate

import (
	"strings"
	"testing"
)

func TestShortID(t *testing.T) {
	tests := []struct{ name, id, want string }{
		{"kfake's 32 hex digits", "gs-member-1-64b419cfef9dddb826aae4f3581e48d5", "gs-member-1-64b419cf"},
		{"Apache Kafka's UUID", "rk-c1-55f28df8-547c-46f9-b9c5-7a37137d87ae", "rk-c1-55f28df8"},
		{"empty client id", "-55f28df8-547c-46f9-b9c5-7a37137d87ae", "-55f28df8"},
		{"KIP-848 member id, already short", "KCPRTVNfQAuQI0SGFI6_Dw", "KCPRTVNfQAuQI0SGFI6_Dw"},
		{"something after the UUID: not a prefix if cut", "hcj-member-1-60bcbb0656f817da2658d55fa19a2ef5-unknown", "hcj-member-1-60bcbb0656f817da2658d55fa19a2ef5-unknown"},
		{"more hex than a UUID", "x-64b419cfef9dddb826aae4f3581e48d5ff", "x-64b419cfef9dddb826aae4f3581e48d5ff"},
		{"upper-case hex is not a broker's", "x-64B419CFEF9DDDB826AAE4F3581E48D5", "x-64B419CFEF9DDDB826AAE4F3581E48D5"},
		{"static member name", "gst-instance-1", "gst-instance-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ShortID(tt.id)
			if got != tt.want {
				t.Errorf("ShortID(%q) = %q, want %q", tt.id, got, tt.want)
			}
			if !strings.HasPrefix(tt.id, got) {
				t.Errorf("ShortID(%q) = %q is not a prefix of the id", tt.id, got)
			}
			// In a text, the same id is shortened the same way.
			text := "member " + tt.id + " (generation 1), " + tt.id + "."
			if want := "member " + tt.want + " (generation 1), " + tt.want + "."; ShortIDs(text) != want {
				t.Errorf("ShortIDs(%q) = %q, want %q", text, ShortIDs(text), want)
			}
		})
	}
}
