// Package decode turns the byte streams of package capture into Kafka
// exchanges: each request decoded with kmsg and matched by correlation id
// with its response, plus anomalies (gaps, resynchronisations, unknown keys,
// oversize frames, unmatched responses, TLS, non-Kafka traffic).
//
// A Decoder is a capture.Sink. Feed it the chunks of any source; it calls a
// Handler synchronously, in capture order, for every exchange and anomaly.
//
// Framing follows the Kafka protocol: every message is an int32 length
// followed by that many bytes. Requests start with a header v0/v1/v2 (key,
// version, correlation id, client id, tagged fields); responses start with a
// header v0/v1 (correlation id, tagged fields), whose key and version come from
// the matching request on the same connection. ApiVersions responses always use
// header v0 (KIP-511), and a broker that does not support the requested
// ApiVersions version answers UNSUPPORTED_VERSION in a v0 body.
//
// When a stream starts mid-way (capture began after the connection opened)
// or loses bytes (a gap), the decoder resynchronises: requests on the next
// offset whose header is plausible and whose body decodes with kmsg; responses
// on the next offset whose length is plausible and whose correlation id
// matches a request seen on the connection. Everything skipped is counted.
//
// SASL authentication bytes and delegation-token HMACs are removed from the
// decoded messages here, before any downstream stage can see them.
//
// For a pipeline that correlates on a second goroutine (kwire analyze):
// Options.DeferResponses passes Produce and Fetch responses on undecoded,
// for a ResponseDecoder on that goroutine to decode exactly as the Decoder
// would; Recycle (and ResponseDecoder.Recycle) take messages back so that
// later frames are read into them instead of newly allocated ones.
package decode
