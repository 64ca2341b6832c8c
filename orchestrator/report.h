// `tessel report RUN_DIR`: one self-contained HTML page that tells how a run went, drawn from the files
// the run left behind: RUN_DIR/metrics.csv (monitoring/run_csv.h: one row per step and worker rank) and
// RUN_DIR/summary.json (orchestrator/run_output.h; optional: a run killed before its end has none, and
// the page says so). The page has a header (job, kind, outcome, and for a failed run its error, exit code
// and failed rank), seven charts drawn as inline SVG (loss, step time per rank with its compute time and
// the stragglers of summary.json marked, the waits on peers by rank and kind, throughput, bandwidth summed
// over ranks, memory per rank, memory by kind) and a table of per-rank medians. It refers to nothing outside itself: no
// URL, no script, no font, so it can be mailed or attached to a ticket as it is.
//
// metrics.csv columns are found by their header names, so a file with more columns (a later version) or
// in another order still reads; a column the page draws but the file lacks reads as empty. A last line
// with fewer cells than the header (the run was killed while writing it) is left out, and the page says
// so. A step written twice by one rank (a resumed run) keeps its last row.
#pragma once

#include <string>

#include "core/status.h"

namespace tessel::orchestrator {

// Reads RUN_DIR/metrics.csv and RUN_DIR/summary.json and writes RUN_DIR/report.html, or `out_path` when
// it is not empty (written to a temporary name and renamed, so a reader never sees half a page).
// Returns the path written (the caller owns the string).
// Thread safety: any thread; it touches nothing but those files. Two calls writing the same path at
// once leave one whole page.
// Failure: kUsage when RUN_DIR has no metrics.csv (naming the file; runs write it since Tessel 0.1.0);
// kBadData for a malformed metrics.csv ("PATH:LINE: column NAME: 'x' is not a number" and the like) or
// summary.json (not JSON, or a key of the wrong type); kStorage when a file cannot be read, or the page
// cannot be written (naming the path).
Result<std::string> WriteRunReport(const std::string& run_dir, const std::string& out_path);

}  // namespace tessel::orchestrator
