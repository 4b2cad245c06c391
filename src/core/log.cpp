#include "core/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <mutex>

#include "core/check.h"

namespace mlpd {

namespace {

// Info and below to stdout, warnings and errors to stderr; the rank prefix where it is needed.
class RankSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit RankSink(int rank) : rank_(rank) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const bool to_err = msg.level >= spdlog::level::warn;
    std::FILE* out = to_err ? stderr : stdout;
    const std::string_view text(msg.payload.data(), msg.payload.size());
    if (to_err || msg.level < spdlog::level::info || rank_ != 0) {
      const auto level = spdlog::level::to_string_view(msg.level);
      std::fprintf(out, "[rank %d] %.*s: %.*s\n", rank_, static_cast<int>(level.size()), level.data(),
                   static_cast<int>(text.size()), text.data());
    } else {
      std::fprintf(out, "%.*s\n", static_cast<int>(text.size()), text.data());
    }
    std::fflush(out);  // progress lines must appear as they happen, also through mpirun
  }
  void flush_() override {
    std::fflush(stdout);
    std::fflush(stderr);
  }

 private:
  int rank_;
};

}  // namespace

const std::vector<std::string>& log_level_names() {
  static const std::vector<std::string> names = {"trace", "debug", "info", "warn", "error", "off"};
  return names;
}

void init_logging(int rank, const std::string& level) {
  const auto lv = spdlog::level::from_str(level);
  if (level != "off" && lv == spdlog::level::off)
    throw UserError("unknown log level '" + level + "' (use trace, debug, info, warn, error or off)", 2);
  auto logger = std::make_shared<spdlog::logger>("mlperf-dist", std::make_shared<RankSink>(rank));
  // Other ranks repeat rank 0's progress: they speak at info only when asked for debug detail.
  logger->set_level(rank != 0 && lv == spdlog::level::info ? spdlog::level::warn : lv);
  spdlog::set_default_logger(logger);
}

}  // namespace mlpd
