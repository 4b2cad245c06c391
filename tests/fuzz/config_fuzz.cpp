// Fuzzes the run configuration path of `train` without MPI: the input becomes a YAML config file
// and/or --set strings, resolved over a workload's embedded defaults (mlperf/config.h), then checked
// by the rules table (mlperf/rules.h) at 0 (a log) to 4 ranks and by the workload's check_config
// hook, in the order of train/setup.cpp.
//
// Input: byte 0 picks what is fuzzed, the rest is text.
//   bit 0: resnet / ncf       bit 1: mini / reference
//   bits 2-3: 0 the text is the config file; 1 its lines are --set strings; 2, 3 both: the text up
//   to a line "%%" is the config file, the lines after it are --set strings.
// Printable first bytes cover every case ('@' resnet mini file, 'E' ncf mini --set, 'K' ncf
// reference both...), so the seed corpus reads as text.
//
// A UserError (exit code 2: a usage error) is the expected answer to a bad config; any other
// exception, a UserError with another code, a crash, a leak or UB is a bug.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/check.h"
#include "mlperf/config.h"
#include "mlperf/keys.h"
#include "mlperf/rules.h"
#include "scratch.h"
#include "workloads/registry.h"

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// MLPD_FUZZ_VERBOSE=1 prints each error: to see what a corpus input reaches.
const bool kVerbose = std::getenv("MLPD_FUZZ_VERBOSE") != nullptr;

void expect_usage_error(const mlpd::UserError& e, const char* stage) {
  if (kVerbose) std::fprintf(stderr, "config_fuzz: %s: %s\n", stage, e.what());
  if (e.exit_code == 2) return;
  std::fprintf(stderr, "config_fuzz: %s threw UserError with exit code %d (expected 2): %s\n", stage, e.exit_code,
               e.what());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t pick = data[0];
  const mlpd::WorkloadEntry& entry = mlpd::find_workload((pick & 1) ? mlpd::keys::kNcf : mlpd::keys::kResnet);
  const std::string scale = (pick & 2) ? "reference" : "mini";
  const int mode = (pick >> 2) & 3;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::string file_text, set_text;
  if (mode == 0) {
    file_text = text;
  } else if (mode == 1) {
    set_text = text;
  } else {
    const size_t sep = text.find("\n%%\n");
    file_text = text.substr(0, sep);
    if (sep != std::string::npos) set_text = text.substr(sep + 4);
  }
  const std::string config_file =
      mode == 1 ? std::string()
                : mlpd::fuzz::write_scratch("config.yaml", reinterpret_cast<const uint8_t*>(file_text.data()),
                                            file_text.size());
  const std::vector<std::string> sets = lines_of(set_text);

  nlohmann::json config;
  try {
    config = mlpd::resolve_config(mlpd::find_scale(entry.spec, scale).defaults_yaml, config_file, sets);
  } catch (const mlpd::UserError& e) {
    expect_usage_error(e, "resolve_config");
    return 0;
  }
  (void)mlpd::format_config(config);
  for (int ranks = 0; ranks <= 4; ++ranks) {
    try {
      (void)mlpd::check_rules(entry.spec, scale, config, mlpd::RunShape{ranks});
      mlpd::enforce_rules(entry.spec, scale, config, mlpd::RunShape{ranks});
      if (entry.check_config) entry.check_config(config);
    } catch (const mlpd::UserError& e) {
      expect_usage_error(e, "rules/check_config");
    }
  }
  return 0;
}
