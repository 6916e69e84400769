package report

// lossFields are the counters (NDJSON stats names, docs/schema.md) that
// say something was lost, skipped or not decoded: shown first, marked.
var lossFields = map[string]string{
	"capture.undecodable":                 "packets whose headers could not be read",
	"capture.snaplen_truncated":           "packets cut short by the capture's snap length",
	"capture.ip_fragments":                "IP fragments (not reassembled)",
	"capture.conns_over_cap":              "connections not followed (--max-conns)",
	"capture.packets_over_cap":            "their packets",
	"capture.gaps":                        "bytes missing from TCP streams: gaps",
	"capture.gap_bytes":                   "bytes in those gaps",
	"capture.buffer_limit_gaps":           "gaps forced by --max-reorder-mb",
	"capture.damaged_packets":             "damaged packets dropped",
	"capture.files_truncated":             "capture files ending in a cut record",
	"capture.files_resynced":              "capture files read past damage",
	"capture.file_bytes_skipped":          "bytes of them skipped",
	"capture.live.kernel_drops":           "packets the kernel dropped (ring full)",
	"capture.live.packets_not_written":    "packets not written to -w",
	"capture.tls_no_keys":                 "TLS connections without keys (not decoded)",
	"capture.tls_unsupported":             "TLS connections kwire cannot decrypt",
	"capture.tls_decrypt_failures":        "TLS records that did not decrypt",
	"decode.unmatched_responses":          "responses whose request was not seen",
	"decode.responses_lost":               "responses lost in gaps",
	"decode.gaps":                         "gaps inside Kafka frames",
	"decode.gap_bytes":                    "bytes in them",
	"decode.resyncs":                      "resynchronisations on the next frame",
	"decode.skipped_bytes":                "bytes skipped to resynchronise",
	"decode.decode_errors":                "bodies kmsg could not decode",
	"decode.unknown_api":                  "frames of unknown API keys",
	"decode.unsupported_versions":         "frames of versions kmsg does not know",
	"decode.oversize_frames":              "frames above --max-frame, skipped",
	"decode.pending_overflow":             "requests past the pending limit",
	"decode.buffer_limit_frames":          "frames skipped past --max-buffer",
	"decode.not_copied_frames":            "frames whose body an eBPF source did not copy",
	"correlate.fetches_unattributed":      "consumer fetches not attributed to a group",
	"correlate.fetches_ambiguous":         "consumer fetches attributed to no one group",
	"correlate.unknown_fetch_sessions":    "incremental fetches of an unseen session",
	"correlate.commits_unanswered":        "commits whose answer was not seen",
	"correlate.hazards_incomplete":        "hazards made info: their evidence may be lost",
	"correlate.unresolved_topic_ids":      "topic ids never named",
	"correlate.limits.groups_dropped":     "requests for groups past --max-groups",
	"correlate.limits.members_dropped":    "members past --max-members forgotten",
	"correlate.limits.partitions_dropped": "partitions past --max-partitions",
	"correlate.limits.clients_evicted":    "clients past --max-clients forgotten",
	"correlate.limits.generations_dropped": "generations beyond the history kept " +
		"(--max-generations): drawn as one band",
	"correlate.limits.commits_dropped": "older commits forgotten (history only: the offsets " +
		"over time are sampled apart)",
}

// notLoss are the counters of lossFields that lose nothing the report
// needs: histories trimmed by design, explained beside them.
var notLoss = map[string]bool{"correlate.limits.commits_dropped": true, "correlate.limits.generations_dropped": true}

// lossRows lists every counter of the run that is not zero, those that
// say something was lost or skipped first; lossless is true when none
// does.
func lossRows(in *Input) (rows []lossRow, lossless bool) {
	var bad, rest []lossRow
	add := func(prefix string, v any, skip ...string) {
		for _, f := range flatFields(v, skip...) {
			k := prefix + f.key
			r := lossRow{What: k, N: f.value, Notes: lossFields[k]}
			if r.Notes != "" && !notLoss[k] {
				r.Bad = true
				bad = append(bad, r)
				continue
			}
			rest = append(rest, r)
		}
	}
	add("capture.", in.Capture)
	add("decode.", in.Decode)
	add("correlate.", in.Snapshot.Stats)
	return append(bad, rest...), len(bad) == 0
}
