#include <gtest/gtest.h>

#include "log_fixture.h"
#include "mlperf/check.h"
#include "workloads/registry.h"
#include "mlperf/keys.h"

namespace mlpd {
namespace {

using namespace mlpd::testing;
using namespace mlpd::keys;

std::string all(const CheckReport& r) {
  std::string s = r.summary + "\n";
  for (const auto& e : r.errors) s += "  error: " + e + "\n";
  for (const auto& w : r.warnings) s += "  warning: " + w + "\n";
  return s;
}

bool has_error(const CheckReport& r, const std::string& part) {
  for (const auto& e : r.errors)
    if (e.find(part) != std::string::npos) return true;
  return false;
}

LogSpec mini_spec() { return mini_resnet_spec(); }

// Fails (never skips) when the official checker is missing.
void require_official_checker() {
  ASSERT_TRUE(official_checker_installed())
      << "the MLCommons compliance checker is not importable: pip install mlperf-logging";
}

TEST(Check, api_written_mini_log_passes) {
  std::string path = write_log(scratch_dir(), mini_spec());
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_TRUE(r.ok) << all(r);
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(r.benchmark, "resnet");
  EXPECT_EQ(r.scale, "mini");
  EXPECT_EQ(r.division, "closed");
  EXPECT_EQ(r.status, "success");
  ASSERT_TRUE(r.final_accuracy.has_value());
  EXPECT_DOUBLE_EQ(*r.final_accuracy, 0.91);
  ASSERT_TRUE(r.run_seconds.has_value());
  EXPECT_GE(*r.run_seconds, 0.0);
  EXPECT_NE(r.summary.find("PASSED"), std::string::npos) << r.summary;
}

TEST(Check, reference_lars_closed_log_passes_ours_and_the_official_checker) {
  require_official_checker();
  std::string path = write_log(scratch_dir(), LogSpec{});
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_TRUE(r.ok) << all(r);
  EXPECT_TRUE(r.converged);
  auto off = run_official_checker(path);
  EXPECT_EQ(off.status, 0) << off.output;
  EXPECT_NE(off.output.find("SUCCESS"), std::string::npos) << off.output;
}

TEST(Check, reference_sgd_closed_and_open_logs_pass_the_official_checker) {
  require_official_checker();
  std::string dir = scratch_dir();
  LogSpec sgd;
  sgd.opt = kSgd;
  LogSpec open;
  open.division = kOpen;
  open.opt = "adam";  // the open division constrains no hyperparameter
  for (const LogSpec& s : {sgd, open}) {
    std::string path = write_log(dir, s);
    CheckReport r = check_result_file(path, &find_benchmark_spec);
    EXPECT_TRUE(r.ok) << all(r);
    auto off = run_official_checker(path);
    EXPECT_EQ(off.status, 0) << s.division << " " << s.opt << "\n" << off.output;
  }
}

TEST(Check, a_rule_violation_fails_ours_and_the_official_checker) {
  require_official_checker();
  LogSpec s;
  s.hyper = {{kLarsOptEndLearningRate, 0.0002}};
  std::string path = write_log(scratch_dir(), s);
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "rule resnet.lars_end_lr_1e-4: lars_opt_end_learning_rate = 0.0002")) << all(r);
  auto off = run_official_checker(path);
  EXPECT_NE(off.status, 0) << off.output;
}

TEST(Check, closed_log_missing_an_optimizer_key_fails) {
  LogSpec s = mini_spec();
  std::string path = write_log(scratch_dir(), s);
  edit_log(path, [](json& j) {
    if (j["key"] == kSgdOptMomentum) j = json::object();
  });
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "missing sgd_opt_momentum")) << all(r);
}

TEST(Check, missing_run_stop_fails) {
  LogSpec s = mini_spec();
  s.run_stop = false;
  CheckReport r = check_result_file(write_log(scratch_dir(), s), &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "missing run_stop")) << all(r);
}

TEST(Check, duplicated_run_start_fails) {
  LogSpec s = mini_spec();
  s.duplicate_run_start = true;
  CheckReport r = check_result_file(write_log(scratch_dir(), s), &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "run_start logged 2 times")) << all(r);
}

TEST(Check, success_below_target_fails) {
  LogSpec s = mini_spec();
  s.final_accuracy = 0.89;
  CheckReport r = check_result_file(write_log(scratch_dir(), s), &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.converged);
  EXPECT_TRUE(has_error(r, "does not reach the target 0.9")) << all(r);
  EXPECT_FALSE(r.complete);
  // A run that says it was aborted is a complete log but, as for MLCommons' checker, not a passing
  // one: a result set may hold one such run (complete), never a lone log (ok).
  s.status = kAborted;
  r = check_result_file(write_log(scratch_dir(), s), &find_benchmark_spec);
  EXPECT_FALSE(r.ok) << all(r);
  EXPECT_TRUE(r.complete) << all(r);
  EXPECT_FALSE(r.converged);
  EXPECT_TRUE(has_error(r, "run aborted without reaching the target")) << all(r);
  ASSERT_EQ(r.errors.size(), 1u) << all(r);
  // Aborted after reaching the target: passes, with a warning.
  s.final_accuracy = 0.95;
  r = check_result_file(write_log(scratch_dir(), s), &find_benchmark_spec);
  EXPECT_TRUE(r.ok) << all(r);
  EXPECT_TRUE(r.complete);
  EXPECT_FALSE(r.converged);
}

TEST(Check, accuracy_outside_the_metrics_declared_range_fails) {
  LogSpec s = mini_spec();
  s.final_accuracy = 1.5;  // top-1 is a fraction: [0, 1]
  CheckReport r = check_result_file(write_log(scratch_dir(), s), &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "outside resnet's top1 range [0, 1]")) << all(r);
  s.final_accuracy = -0.1;
  s.status = kAborted;
  r = check_result_file(write_log(scratch_dir(), s), &find_benchmark_spec);
  EXPECT_TRUE(has_error(r, "outside resnet's top1 range")) << all(r);
}

TEST(Check, unknown_benchmark_fails) {
  LogSpec s = mini_spec();
  s.benchmark = "nobench";
  CheckReport r = check_result_file(write_log(scratch_dir(), s), &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "unknown benchmark 'nobench'")) << all(r);
}

TEST(Check, reference_target_applies_without_scale_metadata) {
  LogSpec s;
  s.final_accuracy = 0.75;  // would pass at mini, not at reference
  std::string path = write_log(scratch_dir(), s);
  edit_log(path, [](json& j) {
    if (j["key"] == kSubmissionBenchmark) j["metadata"].erase(kScale);
  });
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_EQ(r.scale, "reference");
  EXPECT_TRUE(has_error(r, "does not reach the target 0.759")) << all(r);
}

TEST(Check, wrong_dataset_size_for_the_scale_fails) {
  LogSpec s = mini_spec();
  s.train_samples = 1281167;
  CheckReport r = check_result_file(write_log(scratch_dir(), s), &find_benchmark_spec);
  EXPECT_TRUE(has_error(r, "train_samples = 1281167, expected 60000")) << all(r);
}

TEST(Check, malformed_json_is_reported_with_its_line) {
  std::string path = write_log(scratch_dir(), mini_spec());
  std::string text = read_text(path);
  std::ofstream(path) << "some stdout noise\n:::MLLOG {\"key\": broken\n" << text;
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "line 2: malformed MLLOG JSON")) << all(r);
}

TEST(Check, init_over_20_minutes_fails) {
  std::string path = write_log(scratch_dir(), mini_spec());
  edit_log(path, [](json& j) {
    if (j["key"] == kInitStart || j["key"] == kCacheClear || std::string(j["key"]).rfind("submission_", 0) == 0)
      j["time_ms"] = j["time_ms"].get<int64_t>() - 21 * 60 * 1000;
  });
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "over the limit")) << all(r);
}

TEST(Check, mismatched_epoch_and_eval_pairs_fail) {
  std::string path = write_log(scratch_dir(), mini_spec());
  edit_log(path, [](json& j) {
    if (j["key"] == kEpochStop && j["metadata"][kEpochNum] == 2) j["metadata"][kEpochNum] = 3;
    if (j["key"] == kEvalStop && j["metadata"][kEpochNum] == 4) j["metadata"].erase(kEpochNum);
  });
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "epoch_stop 3 does not match epoch_start 2")) << all(r);
  EXPECT_TRUE(has_error(r, "eval_stop without integer metadata epoch_num")) << all(r);
}

TEST(Check, events_out_of_order_fail) {
  std::string path = write_log(scratch_dir(), mini_spec());
  // Move run_start before init_stop by swapping their keys and event types.
  edit_log(path, [](json& j) {
    if (j["key"] == kInitStop) {
      j["key"] = kRunStart;
      j["event_type"] = kIntervalStart;
    } else if (j["key"] == kRunStart) {
      j["key"] = kInitStop;
      j["event_type"] = kIntervalEnd;
    }
  });
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "run_start before init_stop")) << all(r);
}

TEST(Check, missing_file_is_an_error_not_a_crash) {
  CheckReport r = check_result_file(scratch_dir() + "/nope.txt", &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.errors.empty());
}

// ---- hostile logs: each is an error for its line or file, never a crash or a pass ----

// The log at `path` fails the check with an error containing `part`.
void expect_fails_with(const std::string& path, const std::string& part) {
  CheckReport r = check_result_file(path, &find_benchmark_spec);
  EXPECT_FALSE(r.ok) << all(r);
  EXPECT_TRUE(has_error(r, part)) << all(r);
}

// A point-in-time line of `key` with the raw JSON `value` text, at time 0.
std::string raw_line(const std::string& key, const std::string& value) {
  return ":::MLLOG {\"namespace\": \"\", \"time_ms\": 0, \"event_type\": \"POINT_IN_TIME\", \"key\": \"" + key +
         "\", \"value\": " + value + ", \"metadata\": {}}";
}

TEST(CheckHostile, a_line_nested_deeper_than_the_limit_is_an_error_not_a_crash) {
  std::string path = write_log(scratch_dir(), mini_spec());
  const int depth = 600000;  // 300000 levels in 600 KB: enough to overflow the stack of a recursive parser
  edit_lines(path, [&](std::vector<std::string>& lines) {
    lines.push_back(raw_line("weight_decay", std::string(depth / 2, '[') + std::string(depth / 2, ']')));
  });
  expect_fails_with(path, "nested deeper than 32");
}

TEST(CheckHostile, a_line_longer_than_1_MiB_is_an_error) {
  std::string path = write_log(scratch_dir(), mini_spec());
  edit_lines(path, [](std::vector<std::string>& lines) {
    lines.push_back(raw_line(kSubmissionPocName, "\"" + std::string(2 << 20, 'x') + "\""));
  });
  expect_fails_with(path, "longer than 1048576 bytes");
}

TEST(CheckHostile, a_number_beyond_double_range_is_an_error_for_its_line) {
  std::string path = write_log(scratch_dir(), mini_spec());
  size_t line = 0;
  edit_lines(path, [&](std::vector<std::string>& lines) {
    lines.push_back(":::MLLOG {\"namespace\": \"\", \"time_ms\": 1e999, \"event_type\": \"POINT_IN_TIME\", "
                    "\"key\": \"weight_decay\", \"value\": 1, \"metadata\": {}}");
    line = lines.size();
  });
  expect_fails_with(path, "line " + std::to_string(line) + ": malformed MLLOG JSON");
}

TEST(CheckHostile, a_key_repeated_in_one_line_is_an_error) {
  LogSpec s = mini_spec();
  s.final_accuracy = 0.5;  // below the target, unless the repeated value is believed
  std::string path = write_log(scratch_dir(), s);
  edit_log(path, [](json&) {});  // compact lines, keys in order: "value" is last
  edit_lines(path, [](std::vector<std::string>& lines) {
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      if (it->find("\"key\":\"eval_accuracy\"") != std::string::npos) {
        it->insert(it->size() - 1, ",\"value\":0.95");
        break;
      }
  });
  expect_fails_with(path, "key 'value' appears twice");
}

TEST(CheckHostile, an_epoch_num_beyond_exact_integers_is_not_an_integer) {
  std::string path = write_log(scratch_dir(), mini_spec());
  edit_log(path, [](json& j) {
    if (j["key"] == kEpochStart && j["metadata"][kEpochNum] == 2) j["metadata"][kEpochNum] = 1e300;
  });
  expect_fails_with(path, "epoch_start without integer metadata epoch_num");
}

TEST(CheckHostile, a_submission_value_of_the_wrong_type_is_an_error_not_skipped) {
  LogSpec s = mini_spec();
  s.final_accuracy = 0.5;  // below the target: only a skipped benchmark would let it pass
  std::string path = write_log(scratch_dir(), s);
  edit_log(path, [](json& j) {
    if (j["key"] == kSubmissionBenchmark) j["value"] = json::object();
  });
  expect_fails_with(path, "submission_benchmark value is not a string");
}

TEST(CheckHostile, a_test_target_that_is_not_a_number_is_an_error_not_ignored) {
  LogSpec s = mini_spec();
  s.division = kOpen;
  std::string path = write_log(scratch_dir(), s);
  edit_log(path, [](json& j) {
    if (j["key"] == kSubmissionBenchmark) j["metadata"][kTestTarget] = "low";
  });
  expect_fails_with(path, "test_target is not a number");
}

TEST(CheckHostile, time_going_backwards_inside_the_timed_region_fails) {
  std::string path = write_log(scratch_dir(), mini_spec());
  edit_log(path, [](json& j) {
    if (j["key"] == kEpochStop && j["metadata"][kEpochNum] == 2) j["time_ms"] = j["time_ms"].get<int64_t>() - 60000;
  });
  expect_fails_with(path, "time_ms goes backwards inside run_start..run_stop");
}

TEST(CheckHostile, a_negative_time_fails) {
  std::string path = write_log(scratch_dir(), mini_spec());
  edit_log(path, [](json& j) { j["time_ms"] = j["time_ms"].get<int64_t>() - int64_t{4'000'000'000'000}; });
  expect_fails_with(path, "time_ms is negative");
}

TEST(CheckHostile, a_directory_is_an_error_for_that_file) {
  const std::string dir = scratch_dir();
  CheckReport r = check_result_file(dir, &find_benchmark_spec);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has_error(r, "is not a regular file")) << all(r);
  EXPECT_NE(r.summary.find("FAILED"), std::string::npos) << r.summary;
}

}  // namespace
}  // namespace mlpd
