// Test helpers: a scratch directory per test and a complete result log written through the
// mllog API, in the shape the trainer will write (resnet, LARS or SGD, closed or open).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "mlperf/keys.h"
#include "mlperf/mllog.h"

namespace mlpd::testing {

namespace fs = std::filesystem;
using nlohmann::json;

// A fresh, empty directory named for the running test.
inline std::string scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path p = fs::temp_directory_path() / ("mlpd_mlperf_" + std::to_string(::getpid())) /
               (std::string(info->test_suite_name()) + "." + info->name());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct LogSpec {
  std::string division = keys::kClosed;
  std::string benchmark = keys::kResnet;
  std::string scale = "reference";
  std::string opt = keys::kLars;
  int64_t train_samples = 1281167;
  int64_t eval_samples = 50000;
  int64_t global_batch_size = 3072;
  int epochs = 4;
  double final_accuracy = 0.76;
  std::string status = keys::kSuccess;
  bool run_stop = true;
  bool duplicate_run_start = false;
  json hyper = json::object();  // overrides of the optimizer keys logged
};

// A resnet mini closed SGD run, its last eval (at epoch `epochs`) the first at or above 0.90.
inline LogSpec mini_resnet_spec(int epochs = 4) {
  LogSpec s;
  s.scale = "mini";
  s.opt = keys::kSgd;
  s.train_samples = 60000;
  s.eval_samples = 10000;
  s.global_batch_size = 128;
  s.final_accuracy = 0.91;
  s.epochs = epochs;
  return s;
}

// Writes results/<system>/<benchmark>/result_N.txt through the API; returns its path.
inline std::string write_log(const std::string& results_dir, const LogSpec& s) {
  using namespace keys;
  MlLog log = open_mllog(true, results_dir, "testsys", s.benchmark, false);
  mllog_event(log, kSubmissionBenchmark, s.benchmark, {{kScale, s.scale}});
  mllog_event(log, kSubmissionDivision, s.division);
  mllog_event(log, kSubmissionOrg, "mlperf-dist");
  mllog_event(log, kSubmissionPlatform, "testsys");
  mllog_event(log, kSubmissionStatus, "onprem");
  mllog_event(log, kSubmissionPocName, "Test");
  mllog_event(log, kSubmissionPocEmail, "test@example.org");
  mllog_event(log, kCacheClear, true);
  mllog_start(log, kInitStart);
  mllog_event(log, kSeed, 42);
  mllog_event(log, kGlobalBatchSize, s.global_batch_size);
  mllog_event(log, kTrainSamples, s.train_samples);
  mllog_event(log, kEvalSamples, s.eval_samples);
  mllog_event(log, kOptName, s.opt);
  json hp;
  if (s.opt == kLars) {
    hp = {{kLarsOptBaseLearningRate, 9.1},          {kLarsOptEndLearningRate, 0.0001},
          {kLarsOptLearningRateDecayPolyPower, 2},  {kLarsOptLearningRateDecaySteps, 1600},
          {kLarsEpsilon, 0.0},                      {kLarsOptLearningRateWarmupEpochs, 2},
          {kLarsOptMomentum, 0.9},                  {kLarsOptWeightDecay, 0.0001},
          {kModelBnSpan, 32}};
  } else {
    hp = {{kSgdOptBaseLearningRate, 0.1},           {kSgdOptEndLearningRate, 0.0001},
          {kSgdOptLearningRateDecayPolyPower, 2},   {kSgdOptLearningRateDecaySteps, 1600},
          {kSgdOptWeightDecay, 0.0002},             {kSgdOptMomentum, 0.9},
          {kModelBnSpan, 32},                       {kOptLearningRateWarmupEpochs, 1}};
  }
  for (const auto& [k, v] : s.hyper.items()) hp[k] = v;
  for (const auto& [k, v] : hp.items()) mllog_event(log, k, v);
  mllog_end(log, kInitStop);
  mllog_start(log, kRunStart);
  if (s.duplicate_run_start) mllog_start(log, kRunStart);
  for (int e = 1; e <= s.epochs; ++e) {
    mllog_start(log, kEpochStart, nullptr, {{kEpochNum, e}});
    mllog_end(log, kEpochStop, nullptr, {{kEpochNum, e}});
    mllog_start(log, kEvalStart, nullptr, {{kEpochNum, e}});
    double acc = s.final_accuracy * (0.5 + 0.5 * e / s.epochs);
    mllog_end(log, kEvalStop, nullptr, {{kEpochNum, e}});
    mllog_event(log, kEvalAccuracy, acc, {{kEpochNum, e}});
  }
  if (s.run_stop) mllog_end(log, kRunStop, nullptr, {{kStatus, s.status}});
  return close_mllog(log);
}

// Rewrites every :::MLLOG line of `path` through `edit` (which may clear the object to drop it).
inline void edit_log(const std::string& path, const std::function<void(json&)>& edit) {
  std::istringstream in(read_text(path));
  std::string out, line;
  while (std::getline(in, line)) {
    const std::string tok = ":::MLLOG ";
    if (line.rfind(tok, 0) != 0) {
      out += line + "\n";
      continue;
    }
    json j = json::parse(line.substr(tok.size()));
    edit(j);
    if (!j.empty()) out += tok + j.dump() + "\n";
  }
  std::ofstream(path) << out;
}

// Rewrites the raw lines of `path` (without their newlines) through `edit`: for logs a JSON round
// trip cannot write (a repeated key, a line too long or too deeply nested to parse).
inline void edit_lines(const std::string& path, const std::function<void(std::vector<std::string>&)>& edit) {
  std::istringstream in(read_text(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  edit(lines);
  std::ofstream out(path);
  for (const std::string& line : lines) out << line << "\n";
}

// Runs the official MLCommons checker; returns its exit status and output.
struct OfficialResult {
  int status;
  std::string output;
};
inline OfficialResult run_official_checker(const std::string& log_path) {
  std::string dir = fs::path(log_path).parent_path().string();
  std::string cmd = "python3 -m mlperf_logging.compliance_checker --usage training --ruleset 0.7.0 --log_output '" +
                    dir + "/compliance_checker.log' '" + log_path + "' 2>&1";
  OfficialResult r{-1, ""};
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline bool official_checker_installed() {
  return std::system("python3 -c 'import mlperf_logging.compliance_checker.mlp_compliance' >/dev/null 2>&1") == 0;
}

}  // namespace mlpd::testing
