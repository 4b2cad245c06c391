// The report as one self-contained HTML page: inline CSS and inline SVG figures, no script, no
// external resource, so it opens offline, can be mailed, and renders the same in every browser.
//
// Per benchmark folder, a <section class="benchmark" id="bench-K"> where K is the folder's key
// (system-benchmark, reduced to [A-Za-z0-9_-], made unique) holding:
//   <table class="score" id="score-K">       what ran and its score (td.score-value)
//   <table class="runs" id="runs-K">         one <tr class="run" data-run="N"> per run
//   <svg class="quality-vs-time" id="curve-K">  one polyline.run-curve per run that logged an eval,
//                                            and the target as a dashed line.target
//   <svg class="throughput"> / <svg class="comm-share">  per run that logged its run summary
//   <table class="scaling" id="scaling-K"> and <svg class="scaling-time"> / <svg class="scaling-efficiency">
//                                            where runs were made at 2+ rank counts
// and at the top a <table class="summary" id="summary"> with one <tr class="benchmark"> per folder.
// Every string that comes from a log or a folder name is HTML-escaped.
#pragma once
#include <string>
#include <vector>

#include "results/report_model.h"

namespace mlpd {

std::string render_html(const Report& report);

// The section keys of the report's benchmarks, in order (the K above): what ids a reader or a
// test looks for.
std::vector<std::string> section_keys(const Report& report);

}  // namespace mlpd
