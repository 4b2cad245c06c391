// Human log lines (progress, summaries, warnings) go through spdlog: `spdlog::info(...)`,
// `spdlog::warn(...)`. MLLOG result lines never do: they go through the MLLOG writer only
// (mlperf/mllog.h), which may echo them to stdout (`--mllog-stdout`).
//
// init_logging sets the level (`--log-level`) and the rank prefix: rank 0's info lines print as
// they are (the terminal view), other ranks' lines and every warning or error carry "[rank R]";
// info and below go to stdout, warnings and errors to stderr. Ranks other than 0 print info only
// at level debug or trace, so N ranks do not print every line N times.
#pragma once
#include <string>
#include <vector>

namespace mlpd {

// The accepted --log-level values, most verbose first.
const std::vector<std::string>& log_level_names();

// level: one of log_level_names(); anything else is a UserError (exit 2). Call once per process
// (again to change rank or level); before it, spdlog's default logger prints plainly.
void init_logging(int rank, const std::string& level = "info");

}  // namespace mlpd
