#include "mlperf/mllog.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/check.h"
#include "core/output_paths.h"
#include "mlperf/keys.h"

namespace mlpd {
namespace {

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string errno_text() { return std::strerror(errno); }

// Moves `from` to `to` only if `to` does not exist. Returns 0, or the errno of the failure
// (EEXIST when taken).
int rename_noreplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return errno;
  // The file system has no RENAME_NOREPLACE: link() also refuses an existing name.
  if (::link(from.c_str(), to.c_str()) != 0) return errno;
  ::unlink(from.c_str());
  return 0;
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Gives the open file `fd` the name `target` only if that name is free: a hard link to an
// unnamed (O_TMPFILE) file, or a no-replace rename of a named temporary. 0 or the errno.
int claim_name(const MlLog& log, int fd, const std::string& target) {
  if (!log.anonymous) return rename_noreplace(log.tmp_path, target);
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, target.c_str(), AT_SYMLINK_FOLLOW) == 0) return 0;
  return errno;
}

// Flush, fsync, claim result_<N>.txt, close. On failure returns "" and sets `err`; the partial log
// is then gone (unlinked, or never named).
std::string finish(MlLog& log, std::string& err) {
  FILE* f = log.file;
  log.file = nullptr;
  bool io_ok = std::fflush(f) == 0;
  io_ok = (::fsync(::fileno(f)) == 0) && io_ok;
  std::string target;
  int e = 0;
  if (io_ok) {
    for (int n = 0; n < 1000000; ++n) {
      target = log.dir + "/result_" + std::to_string(n) + ".txt";
      e = claim_name(log, ::fileno(f), target);
      if (e != EEXIST) break;
    }
  }
  const bool closed = std::fclose(f) == 0;
  if (!io_ok || !closed) {
    // A log that could not be written completely is never given a result name.
    err = "cannot write result log " + log.tmp_path + ": " + errno_text() + " (the partial log is removed)";
    if (!log.anonymous) ::unlink(log.tmp_path.c_str());
    if (io_ok && e == 0) ::unlink(target.c_str());
    return "";
  }
  if (e != 0) {
    err = e == EEXIST ? "no free result_<N>.txt name in " + log.dir
                      : "cannot name " + log.tmp_path + " " + target + ": " + std::strerror(e);
    if (!log.anonymous) ::unlink(log.tmp_path.c_str());
    return "";
  }
  fsync_dir(log.dir);
  log.final_path = target;
  return target;
}

void write_event(MlLog& log, const char* event_type, std::string_view key, const nlohmann::json& value,
                 const nlohmann::json& metadata, const std::source_location& loc) {
  if (!log.file) return;
  std::string line = format_mllog_line(now_ms(), event_type, key, value, metadata, loc);
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), log.file) != line.size() || std::fflush(log.file) != 0)
    throw UserError("cannot write result log " + log.tmp_path + ": " + errno_text());
  if (log.echo_stdout) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace

std::string short_source_path(const char* file_name) {
  // This file is <root>/src/mlperf/mllog.cpp: strip <root>/ from paths under the same root.
  static const std::string root = [] {
    std::string self = std::source_location::current().file_name();
    const std::string tail = "src/mlperf/mllog.cpp";
    if (self.size() >= tail.size() && self.compare(self.size() - tail.size(), tail.size(), tail) == 0)
      return self.substr(0, self.size() - tail.size());
    return std::string();
  }();
  std::string f = file_name ? file_name : "";
  if (!root.empty() && f.rfind(root, 0) == 0) return f.substr(root.size());
  if (f.rfind("/", 0) != 0) return f;  // already relative
  return std::filesystem::path(f).filename().string();
}

std::string format_mllog_line(int64_t time_ms, std::string_view event_type, std::string_view key,
                              const nlohmann::json& value, const nlohmann::json& metadata,
                              const std::source_location& loc) {
  if (!metadata.is_null() && !metadata.is_object())
    throw std::invalid_argument("mllog metadata for '" + std::string(key) + "' must be an object");
  nlohmann::ordered_json md;
  md[keys::kMetaFile] = short_source_path(loc.file_name());
  md[keys::kMetaLineno] = loc.line();
  if (metadata.is_object())
    for (const auto& [k, v] : metadata.items()) md[k] = v;
  nlohmann::ordered_json j;
  j["namespace"] = "";
  j["time_ms"] = time_ms;
  j["event_type"] = event_type;
  j["key"] = key;
  j["value"] = value;
  j["metadata"] = std::move(md);
  return ":::MLLOG " + j.dump();
}

MlLog::MlLog(MlLog&& o) noexcept
    : file(o.file), echo_stdout(o.echo_stdout), anonymous(o.anonymous), dir(std::move(o.dir)),
      tmp_path(std::move(o.tmp_path)), final_path(std::move(o.final_path)) {
  o.file = nullptr;
}

MlLog& MlLog::operator=(MlLog&& o) noexcept {
  if (this != &o) {
    MlLog old(std::move(*this));  // finishes the log this one held, if any
    file = o.file;
    o.file = nullptr;
    echo_stdout = o.echo_stdout;
    anonymous = o.anonymous;
    dir = std::move(o.dir);
    tmp_path = std::move(o.tmp_path);
    final_path = std::move(o.final_path);
  }
  return *this;
}

MlLog::~MlLog() {
  if (!file) return;
  const std::string path = tmp_path;
  discard_mllog(*this);
  spdlog::warn("mllog: the run ended before its log was closed; the incomplete log {} was removed", path);
}

MlLog open_mllog(bool enabled, const std::string& results_dir, const std::string& system,
                 const std::string& benchmark, bool echo_stdout) {
  MlLog log;
  if (!enabled) return log;
  check_path_component("system name", system);
  check_path_component("benchmark name", benchmark);
  std::filesystem::path dir = std::filesystem::path(results_dir) / system / benchmark;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError("cannot create results directory " + dir.string() + ": " + ec.message());
  // An unnamed file (O_TMPFILE) where the file system has them: a process killed mid-run (SIGKILL
  // from mpirun after a rank died) leaves nothing behind. Else a named temporary.
  std::string tmpl = (dir / "(unnamed result log)").string();
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  log.anonymous = fd >= 0;
  if (fd < 0) {
    tmpl = (dir / ".result_XXXXXX.txt.tmp").string();
    fd = ::mkstemps(tmpl.data(), 8);  // suffix ".txt.tmp"
    if (fd < 0) throw UserError("cannot create result log in " + dir.string() + ": " + errno_text());
  }
  ::fchmod(fd, 0644);
  FILE* f = ::fdopen(fd, "w");
  if (!f) {
    ::close(fd);
    if (!log.anonymous) ::unlink(tmpl.c_str());
    throw UserError("cannot open result log " + tmpl + ": " + errno_text());
  }
  log.file = f;
  log.echo_stdout = echo_stdout;
  log.dir = dir.string();
  log.tmp_path = tmpl;
  return log;
}

void mllog_event(MlLog& log, std::string_view key, const nlohmann::json& value, nlohmann::json metadata,
                 std::source_location loc) {
  write_event(log, keys::kPointInTime, key, value, metadata, loc);
}

void mllog_start(MlLog& log, std::string_view key, const nlohmann::json& value, nlohmann::json metadata,
                 std::source_location loc) {
  write_event(log, keys::kIntervalStart, key, value, metadata, loc);
}

void mllog_end(MlLog& log, std::string_view key, const nlohmann::json& value, nlohmann::json metadata,
               std::source_location loc) {
  write_event(log, keys::kIntervalEnd, key, value, metadata, loc);
}

void discard_mllog(MlLog& log) {
  if (!log.file) return;
  std::fclose(log.file);
  log.file = nullptr;
  if (!log.anonymous) ::unlink(log.tmp_path.c_str());
}

std::string close_mllog(MlLog& log) {
  if (!log.file) return "";
  std::string err;
  std::string path = finish(log, err);
  if (path.empty()) throw UserError(err);
  return path;
}

}  // namespace mlpd
