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
// and at the top a <table class="summary" id="summary"> with one <tr class="benchmark"> per folder
// (left out when the directory holds scaling studies only).
//
// Then per scaling study (a scale.json) a <section class="scale-study" id="scale-S"> where S is
// benchmark-scale-mode, reduced and made unique the same way, holding:
//   <table class="scale-runs" id="scale-runs-S">  one <tr class="scale-run" data-ranks="N"> per rank
//                                            count (class "scale-run oversubscribed" when its ranks
//                                            per node exceed the cores per node); columns as
//                                            scale_table gives them
//   <svg class="scale-efficiency" id="scale-efficiency-S">  efficiency (%) vs ranks, log2 x
//   <svg class="scale-split" id="scale-split-S">  per rank count a g.stacked-bar of four
//                                            rect.segment: compute, comm, skew, update (ms)
//   <svg class="scale-step-time" id="scale-step-time-S">  measured and predicted step (ms) vs ranks
//   <dl class="scale-profile" id="scale-profile-S">  the file's "profile", key by key
// Every string that comes from a log, a folder name or a scale.json is HTML-escaped.
#pragma once
#include <string>
#include <vector>

#include "results/report_model.h"

namespace mlpd {

std::string render_html(const Report& report);

// The section keys of the report's benchmarks, in order (the K above): what ids a reader or a
// test looks for.
std::vector<std::string> section_keys(const Report& report);
// The same for the report's scaling studies (the S above).
std::vector<std::string> study_keys(const Report& report);

}  // namespace mlpd
