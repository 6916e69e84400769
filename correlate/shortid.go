package correlate

import "regexp"

// idTail is the random part a broker gives a classic member id (its
// client id, "-", then a UUID: Kafka's GroupCoordinator; franz-go kfake
// writes the UUID as 32 hex digits), kept to its first 8 digits, and what
// follows it in a text: the end, or a character no id goes on with.
var idTail = regexp.MustCompile(`(-[0-9a-f]{8})(?:[0-9a-f]{24}|-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})([^0-9A-Za-z_-]|$)`)

// ShortID is how people read member id id: a generated id is cut after
// the first 8 hex digits of its random part ("consumer-1-3f0c6c1e" of
// "consumer-1-3f0c6c1e-2b5d-4e5a-9c1b-0123456789ab"), every other id is
// whole. The short form is a prefix of the id, so that it can be copied
// and searched for in the NDJSON, which always has ids whole. Every text
// kwire writes (text output, terminal UI) shortens ids this way.
func ShortID(id string) string {
	if m := idTail.FindStringSubmatchIndex(id); m != nil && m[5] == len(id) {
		return id[:m[3]]
	}
	return id
}

// ShortIDs shortens, as ShortID, every generated member id in text, e.g.
// a hazard's summary.
func ShortIDs(text string) string {
	if len(text) < 34 { // the shortest id with a tail: "-" and 32 digits
		return text
	}
	return idTail.ReplaceAllString(text, "$1$2")
}
