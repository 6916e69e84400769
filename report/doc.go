// Package report writes one self-contained HTML report of a capture: the
// picture people paste into an incident ticket (issue 38). It opens in
// any browser offline: its styles and figures (SVG, written here) are
// inline, and it needs no script.
//
// It takes in what the pipeline produces, never raw traffic: the final
// correlate.Snapshot (groups, generations with the exchanges they rest
// on, members, partitions, hazards with their evidence, transactions),
// the capture and decode counters, and a Recorder that kept, while the
// capture was analysed, what the Snapshot does not hold: each group
// partition's offsets over time (sampled from the Correlator), how many
// generations each group went through, and the first anomalies. It gives
// out the page: an overview (span, sources, brokers, groups, hazard
// counts, everything lost or skipped), per group a timeline (generations
// as bands, one lane per member, hazards as markers), partition
// ownership over time and offsets over time, and every hazard and
// generation with its exchanges and a Wireshark display filter for each.
//
// Past fixed limits (members drawn, partitions charted, hazards listed)
// items are summarised, so that the page of a capture with thousands of
// generations or members stays a few MB at most. The page depends only
// on its Input: offline runs write the same report every time.
package report
