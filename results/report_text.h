// The report as text, for terminals, pull requests and scripts:
//   md    a table with one row per benchmark folder (its score), then per folder one row per run
//         (and its scaling table); times in minutes, as the HTML page shows them; then per scaling
//         study (scale.json) its table (scale_table: ms per step) and its model profile.
//   csv   one table, RFC 4180 quoting, a `kind` column: one "benchmark" row per folder (score
//         columns filled), one "run" row per run (run columns filled); times in seconds. Scaling
//         studies are not in it: `scale` writes its own scale.csv beside scale.json.
//   json  the whole model (nlohmann::json): every run with its eval curve and run summary, and
//         "scale_studies" (each as read, profile flattened); times in seconds; absent values are null.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "results/report_model.h"

namespace mlpd {

std::string render_markdown(const Report& report);
std::string render_csv(const Report& report);
nlohmann::json report_json(const Report& report);
std::string render_json(const Report& report);  // report_json, indented, invalid UTF-8 replaced

}  // namespace mlpd
