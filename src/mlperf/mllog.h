// MLPerf result log: `:::MLLOG {json}` lines, one per event, in the format of mlperf_logging.mllog
// (keys in this order: namespace, time_ms, event_type, key, value, metadata{file, lineno, ...}).
//
// The log is written to an unnamed file (O_TMPFILE) in results/<system>/<benchmark>/ (a named
// temporary where the file system lacks them) and, when closed, given the final name
// result_<N>.txt with N the smallest free number, by link() (or an atomic no-replace rename):
// an existing result is never overwritten, even by a concurrent writer choosing the same N, and a
// process killed mid-run leaves no file at all.
//
// Every line is flushed as it is written. close_mllog() also fsyncs the file and the directory.
// Only a complete log gets a result name: a write, flush or close that fails removes the temporary
// file, and so does an MlLog destroyed without close_mllog() (an exception path; the trainer
// logs run_stop with status aborted and closes the log itself when a run fails after run_start).
//
// A disabled MlLog (ranks other than 0, or logging off) makes every call a no-op.
// Not thread-safe: log from one thread.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <source_location>
#include <string>
#include <string_view>

namespace mlpd {

struct MlLog {
  FILE* file = nullptr;      // null when disabled or closed
  bool echo_stdout = false;  // also print every line to stdout
  bool anonymous = false;    // an unnamed O_TMPFILE file until close (tmp_path is then a label)
  std::string dir;           // results_dir/system/benchmark
  std::string tmp_path;      // where lines go until close
  std::string final_path;    // set by close

  MlLog() = default;
  MlLog(const MlLog&) = delete;
  MlLog& operator=(const MlLog&) = delete;
  MlLog(MlLog&& o) noexcept;
  MlLog& operator=(MlLog&& o) noexcept;
  ~MlLog();  // removes the temporary file if still open (see above); never throws

  bool enabled() const { return file != nullptr; }
};

// enabled=false gives a no-op logger (and touches no file). Otherwise creates
// results_dir/system/benchmark/ and the temporary file; a failure is a UserError.
MlLog open_mllog(bool enabled, const std::string& results_dir, const std::string& system,
                 const std::string& benchmark, bool echo_stdout);

// A POINT_IN_TIME event. metadata must be an object or null; file and lineno are added.
void mllog_event(MlLog& log, std::string_view key, const nlohmann::json& value,
                 nlohmann::json metadata = {},
                 std::source_location loc = std::source_location::current());
// INTERVAL_START / INTERVAL_END events (value is usually null).
void mllog_start(MlLog& log, std::string_view key, const nlohmann::json& value = nullptr,
                 nlohmann::json metadata = {},
                 std::source_location loc = std::source_location::current());
void mllog_end(MlLog& log, std::string_view key, const nlohmann::json& value = nullptr,
               nlohmann::json metadata = {},
               std::source_location loc = std::source_location::current());

// Flushes, fsyncs, renames to result_<N>.txt; returns the final path ("" for a disabled or
// already closed log). Failure is a UserError; the temporary file is then removed.
std::string close_mllog(MlLog& log);
// Closes and removes the temporary file: the run produced no result (failed before run_start).
void discard_mllog(MlLog& log);

// The line as written (without newline), exposed for tests and for the stdout echo.
std::string format_mllog_line(int64_t time_ms, std::string_view event_type, std::string_view key,
                              const nlohmann::json& value, const nlohmann::json& metadata,
                              const std::source_location& loc);

// "src/train/loop.cpp" for a source file of this repository, else the basename.
std::string short_source_path(const char* file_name);

}  // namespace mlpd
