#include "mlperf/check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string_view>

#include "core/check.h"
#include "mlperf/keys.h"
#include "mlperf/benchmark_spec.h"
#include "mlperf/rules.h"

namespace mlpd {
namespace {

using json = nlohmann::json;
using namespace keys;

constexpr const char* kToken = ":::MLLOG ";
constexpr double kInitLimitMs = 20 * 60 * 1e3;  // 0.7.0 common.yaml: init_stop within 20 min
// Limits on one line, checked before it is parsed. Our longest lines (the resolved config) are a
// few KiB and nest 3 levels; every copy, comparison or dump of a parsed nlohmann::json value
// recurses once per level, so a line nested 300,000 deep overflowed the stack.
constexpr size_t kMaxLineBytes = size_t{1} << 20;
constexpr int kMaxJsonDepth = 32;
// 2^53: beyond it a JSON number is no longer an exact integer, and the checks' sums of epoch
// numbers (n + 1, first + count) stay far from int64 overflow.
constexpr double kMaxExactInteger = 9007199254740992.0;

struct Ev {
  int line;
  double time_ms;
  std::string type, key;
  json value, metadata;
};

// Keys every log must carry exactly once (0.7.0 common/closed_resnet, plus seed and opt_name).
const char* const kExactlyOnce[] = {kSubmissionBenchmark, kSubmissionDivision, kSubmissionOrg,
                                    kSubmissionPlatform,  kSubmissionStatus,   kInitStop,
                                    kRunStart,            kRunStop,            kSeed,
                                    kGlobalBatchSize,     kOptName,            kTrainSamples,
                                    kEvalSamples};
const char* const kAtLeastOnce[] = {kCacheClear, kInitStart, kEvalAccuracy};
const char* const kOfficialBenchmarks[] = {"resnet", "ssd", "maskrcnn", "transformer",
                                           "gnmt",   "minigo", "dlrm",   "bert"};

const std::set<std::string> kStartKeys = {kInitStart, kRunStart, kEpochStart, kBlockStart, kEvalStart};
const std::set<std::string> kStopKeys = {kInitStop, kRunStop, kEpochStop, kBlockStop, kEvalStop};

std::string at(const Ev& e) { return "line " + std::to_string(e.line) + ": "; }

std::string fmt(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

// "0.59", or for a metric of parts (Mask R-CNN's) "{BBOX 0.59, SEGM 0.467}".
std::string fmt_parts(const MetricSpec& m, const std::vector<double>& v) {
  if (m.parts.empty() || v.size() != m.parts.size()) return v.empty() ? std::string("?") : fmt(v[0]);
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + m.parts[i] + " " + fmt(v[i]);
  return s + "}";
}

// Integer metadata field, or nullopt (absent, not a whole number, or beyond kMaxExactInteger:
// casting 1e300 would be UB).
std::optional<int64_t> meta_int(const Ev& e, const char* field) {
  if (!e.metadata.contains(field)) return std::nullopt;
  const auto& v = e.metadata.at(field);
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  if (!(std::fabs(d) <= kMaxExactInteger) || std::nearbyint(d) != d) return std::nullopt;
  return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(d);
}

struct Checker {
  explicit Checker(CheckReport& report) : r(report) {}
  CheckReport& r;
  void error(const std::string& s) { r.errors.push_back(s); }
  void warn(const std::string& s) { r.warnings.push_back(s); }

  // Ordering state (the 0.7.0 common + 0.7.0_warn state machine).
  bool init_started = false, init_stopped = false, run_started = false, run_stopped = false;
  double first_init_start = 0;
  std::optional<int64_t> open_epoch, open_eval, open_block;
  int64_t last_epoch = 0, last_covered = 0, last_eval = 0;
  bool accuracy_printed = true, any_eval_start = false;
  const Ev* run_start_ev = nullptr;
  const Ev* run_stop_ev = nullptr;
  const Ev* last_accuracy = nullptr;
  std::vector<const Ev*> accuracies;  // every numeric eval_accuracy, in log order

  void need_run(const Ev& e) {
    if (!run_started) error(at(e) + e.key + " before run_start");
    if (run_stopped) error(at(e) + e.key + " after run_stop");
  }

  void order(const Ev& e) {
    const std::string& k = e.key;
    if (k == kCacheClear) {
      if (init_started) warn(at(e) + "cache_clear should come before init_start");
      if (e.value != json(true)) warn(at(e) + "cache_clear value should be true");
    } else if (k == kInitStart) {
      if (init_stopped || run_started) error(at(e) + "init_start after init_stop/run_start");
      if (!init_started) first_init_start = e.time_ms;
      first_init_start = std::min(first_init_start, e.time_ms);
      init_started = true;
    } else if (k == kInitStop) {
      if (!init_started) error(at(e) + "init_stop without init_start");
      if (run_started) error(at(e) + "init_stop after run_start");
      if (init_started && e.time_ms - first_init_start >= kInitLimitMs)
        error(at(e) + "init took " + fmt((e.time_ms - first_init_start) / 1e3) + " s, over the limit of " +
              fmt(kInitLimitMs / 1e3) + " s");
      init_stopped = true;
    } else if (k == kRunStart) {
      if (!init_stopped) error(at(e) + "run_start before init_stop");
      if (!run_start_ev) run_start_ev = &e;
      run_started = true;
    } else if (k == kRunStop) {
      if (!run_started) error(at(e) + "run_stop before run_start");
      if (open_eval) error(at(e) + "run_stop inside an evaluation (eval_start without eval_stop)");
      if (!e.metadata.contains(kStatus)) {
        error(at(e) + "run_stop without metadata status");
      } else {
        const auto& s = e.metadata.at(kStatus);
        if (!s.is_string() || (s != kSuccess && s != kAborted))
          error(at(e) + "run_stop status " + s.dump() + " is not success or aborted");
      }
      if (!run_stop_ev) run_stop_ev = &e;
      run_stopped = true;
    } else if (k == kEpochStart) {
      need_run(e);
      auto n = meta_int(e, kEpochNum);
      if (!n) return error(at(e) + "epoch_start without integer metadata epoch_num");
      if (open_epoch) error(at(e) + "epoch_start " + std::to_string(*n) + " inside epoch " + std::to_string(*open_epoch));
      if (*n <= last_epoch)
        error(at(e) + "epoch_num " + std::to_string(*n) + " does not increase (last " + std::to_string(last_epoch) + ")");
      else if (*n != last_epoch + 1)
        warn(at(e) + "epoch_num " + std::to_string(*n) + " skips from " + std::to_string(last_epoch));
      open_epoch = *n;
      last_epoch = std::max(last_epoch, *n);
      last_covered = std::max(last_covered, *n);
    } else if (k == kEpochStop) {
      auto n = meta_int(e, kEpochNum);
      if (!n) return error(at(e) + "epoch_stop without integer metadata epoch_num");
      if (!open_epoch) return error(at(e) + "epoch_stop " + std::to_string(*n) + " without epoch_start");
      if (*n != *open_epoch)
        error(at(e) + "epoch_stop " + std::to_string(*n) + " does not match epoch_start " + std::to_string(*open_epoch));
      open_epoch.reset();
    } else if (k == kBlockStart) {
      need_run(e);
      auto first = meta_int(e, kFirstEpochNum), count = meta_int(e, kEpochCount);
      if (!first || !count) return error(at(e) + "block_start needs integer metadata first_epoch_num and epoch_count");
      if (*count <= 0) error(at(e) + "block_start epoch_count must be > 0");
      if (open_block) error(at(e) + "block_start inside block " + std::to_string(*open_block));
      open_block = *first;
      accuracy_printed = true;
      // The last epoch a block covers, saturated: a hostile first_epoch_num + epoch_count may overflow.
      if (int64_t last = 0; *count > 0)
        last_covered = std::max(last_covered, __builtin_add_overflow(*first, *count - 1, &last) ? INT64_MAX : last);
    } else if (k == kBlockStop) {
      auto first = meta_int(e, kFirstEpochNum);
      if (!first) return error(at(e) + "block_stop without integer metadata first_epoch_num");
      if (!open_block) return error(at(e) + "block_stop without block_start");
      if (*first != *open_block)
        error(at(e) + "block_stop first_epoch_num " + std::to_string(*first) + " does not match block_start " +
              std::to_string(*open_block));
      if (!accuracy_printed) error(at(e) + "block_stop before the eval_accuracy of its evaluation");
      open_block.reset();
    } else if (k == kEvalStart) {
      need_run(e);
      auto n = meta_int(e, kEpochNum);
      if (!n) return error(at(e) + "eval_start without integer metadata epoch_num");
      if (open_eval) error(at(e) + "eval_start inside evaluation " + std::to_string(*open_eval));
      if (!accuracy_printed) error(at(e) + "eval_start before the previous evaluation logged eval_accuracy");
      if (*n <= last_eval && any_eval_start)
        error(at(e) + "eval epoch_num " + std::to_string(*n) + " does not increase (last " + std::to_string(last_eval) + ")");
      if (*n > last_covered)
        error(at(e) + "eval_start epoch_num " + std::to_string(*n) + " is after the last epoch trained (" +
              std::to_string(last_covered) + ")");
      open_eval = *n;
      last_eval = *n;
      any_eval_start = true;
      accuracy_printed = false;
    } else if (k == kEvalStop) {
      auto n = meta_int(e, kEpochNum);
      if (!n) return error(at(e) + "eval_stop without integer metadata epoch_num");
      if (!open_eval) return error(at(e) + "eval_stop " + std::to_string(*n) + " without eval_start");
      if (*n != *open_eval)
        error(at(e) + "eval_stop " + std::to_string(*n) + " does not match eval_start " + std::to_string(*open_eval));
      open_eval.reset();
    } else if (k == kEvalAccuracy) {
      auto n = meta_int(e, kEpochNum);
      if (!n) return error(at(e) + "eval_accuracy without integer metadata epoch_num");
      // A number, or an object of numbers (Mask R-CNN's {"BBOX": x, "SEGM": y}); which of the two
      // the benchmark logs is checked once the benchmark is known (the result section).
      bool numeric = e.value.is_number() && !e.value.is_boolean();
      if (e.value.is_object() && !e.value.empty()) {
        numeric = true;
        for (const auto& [part, v] : e.value.items()) numeric = numeric && v.is_number() && !v.is_boolean();
      }
      if (!numeric) return error(at(e) + "eval_accuracy value is not a number (nor an object of numbers)");
      if (!run_started || run_stopped) error(at(e) + "eval_accuracy outside run_start..run_stop");
      if (any_eval_start && *n != last_eval)
        error(at(e) + "eval_accuracy epoch_num " + std::to_string(*n) + " does not match eval_start " +
              std::to_string(last_eval));
      accuracy_printed = true;
      last_accuracy = &e;
      accuracies.push_back(&e);
    }
  }
};

// Whether JSON text nests arrays and objects deeper than kMaxJsonDepth, counting brackets outside
// strings: linear, without parsing. Past a syntax error the count may be off, but the parser
// stops there anyway.
bool nested_too_deep(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return false;
}

struct RepeatedKey : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses JSON that must not repeat a key within one object: the parser would silently keep the
// last value, so a line could say two things and be read as either. Throws json::exception on
// malformed JSON (parse_error; out_of_range for a number like 1e999), RepeatedKey on a repeat.
json parse_without_repeated_keys(std::string_view text) {
  std::vector<std::set<std::string>> keys_of_open_objects;
  return json::parse(text, [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys_of_open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      keys_of_open_objects.pop_back();
    } else if (event == json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys_of_open_objects.back().insert(key).second)
        throw RepeatedKey("key '" + key + "' appears twice in one object");
    }
    return true;
  });
}

bool parse_line(const std::string& text, int lineno, std::vector<Ev>& out, CheckReport& r) {
  size_t p = text.rfind(kToken);  // like the official parser: anything before the last token is dropped
  if (p == std::string::npos) return false;
  const std::string_view body = std::string_view(text).substr(p + std::string_view(kToken).size());
  std::string where = "line " + std::to_string(lineno) + ": ";
  if (nested_too_deep(body))
    return r.errors.push_back(where + "MLLOG JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels"), true;
  json j;
  try {
    j = parse_without_repeated_keys(body);
  } catch (const std::exception& e) {
    r.errors.push_back(where + "malformed MLLOG JSON (" + e.what() + ")");
    return true;
  }
  if (!j.is_object()) return r.errors.push_back(where + "MLLOG line is not a JSON object"), true;
  for (const char* f : {"namespace", "time_ms", "event_type", "key", "value", "metadata"})
    if (!j.contains(f)) return r.errors.push_back(where + "MLLOG line has no field '" + f + "'"), true;
  if (!j["time_ms"].is_number() || j["time_ms"].is_boolean())
    return r.errors.push_back(where + "time_ms is not a number"), true;
  if (j["time_ms"].get<double>() < 0) return r.errors.push_back(where + "time_ms is negative"), true;
  if (!j["key"].is_string()) return r.errors.push_back(where + "key is not a string"), true;
  if (!j["event_type"].is_string()) return r.errors.push_back(where + "event_type is not a string"), true;
  if (!j["metadata"].is_object()) return r.errors.push_back(where + "metadata is not an object"), true;
  Ev e{lineno, j["time_ms"].get<double>(), j["event_type"].get<std::string>(), j["key"].get<std::string>(),
       j["value"], j["metadata"]};
  std::string want = kStartKeys.count(e.key) ? kIntervalStart : kStopKeys.count(e.key) ? kIntervalEnd : kPointInTime;
  if (e.type != kPointInTime && e.type != kIntervalStart && e.type != kIntervalEnd)
    r.errors.push_back(where + "unknown event_type '" + e.type + "'");
  else if (e.type != want)
    r.errors.push_back(where + e.key + " has event_type " + e.type + ", expected " + want);
  out.push_back(std::move(e));
  return true;
}

enum class LineRead { Line, TooLong, End };

// Reads one line, without its '\n'. A line longer than kMaxLineBytes is read to its end but not
// kept: a file of junk without newlines costs time, never memory.
LineRead read_line(std::streambuf& in, std::string& line) {
  line.clear();
  bool too_long = false;
  for (int ch = in.sbumpc();; ch = in.sbumpc()) {
    if (ch == std::char_traits<char>::eof())
      return too_long ? LineRead::TooLong : line.empty() ? LineRead::End : LineRead::Line;
    if (ch == '\n') return too_long ? LineRead::TooLong : LineRead::Line;
    if (too_long) continue;
    if (line.size() == kMaxLineBytes) {
      too_long = true;
      line.clear();
      continue;
    }
    line.push_back(static_cast<char>(ch));
  }
}

CheckReport unreadable(const std::string& path, const std::string& why) {
  CheckReport r;
  r.errors.push_back(why);
  r.summary = path + ": FAILED (" + why + ")";
  return r;
}

}  // namespace

CheckReport check_result_file(const std::string& path, const BenchmarkLookup& lookup) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return unreadable(path, "cannot open " + path);
  if (!std::filesystem::is_regular_file(path, ec)) return unreadable(path, path + " is not a regular file");
  std::filebuf in;
  if (!in.open(path, std::ios::in | std::ios::binary)) return unreadable(path, "cannot open " + path);
  CheckReport r;
  std::vector<Ev> evs;
  std::string text;
  int lineno = 1;
  for (LineRead got; (got = read_line(in, text)) != LineRead::End; ++lineno) {
    if (got == LineRead::TooLong)
      r.errors.push_back("line " + std::to_string(lineno) + ": longer than " + std::to_string(kMaxLineBytes) +
                         " bytes, not read");
    else
      parse_line(text, lineno, evs, r);
  }
  if (evs.empty()) r.errors.push_back("no :::MLLOG lines");

  // ---- occurrences ----
  std::map<std::string, std::vector<const Ev*>> by_key;
  for (const auto& e : evs) by_key[e.key].push_back(&e);
  auto count = [&](const std::string& k) { return by_key.count(k) ? by_key[k].size() : size_t{0}; };
  auto first = [&](const std::string& k) -> const Ev* { return count(k) ? by_key[k].front() : nullptr; };
  auto exactly_once = [&](const std::string& k) {
    size_t n = count(k);
    if (n == 0) r.errors.push_back("missing " + k + " (required exactly once)");
    if (n > 1) {
      std::string lines;
      for (const Ev* e : by_key[k]) lines += (lines.empty() ? "" : ", ") + std::to_string(e->line);
      r.errors.push_back(k + " logged " + std::to_string(n) + " times (lines " + lines + "), required exactly once");
    }
  };
  for (const char* k : kExactlyOnce) exactly_once(k);
  for (const char* k : kAtLeastOnce)
    if (!count(k)) r.errors.push_back("missing " + std::string(k) + " (required at least once)");
  if (!count(kEpochStart) && !count(kBlockStart)) r.errors.push_back("missing epoch_start or block_start");
  if (!count(kEpochStop) && !count(kBlockStop)) r.errors.push_back("missing epoch_stop or block_stop");
  if (!count(kEvalStart) && !count(kBlockStart)) r.errors.push_back("missing eval_start (or block_start)");
  if (!count(kEvalStop) && !count(kBlockStop)) r.errors.push_back("missing eval_stop (or block_stop)");

  // ---- submission values ----
  auto str_of = [&](const char* k) -> std::string {
    const Ev* e = first(k);
    return e && e->value.is_string() ? e->value.get<std::string>() : std::string();
  };
  for (const char* k : {kSubmissionOrg, kSubmissionPlatform})
    if (const Ev* e = first(k); e && (!e->value.is_string() || str_of(k).empty()))
      r.errors.push_back(at(*e) + k + " must be a non-empty string");
  r.division = str_of(kSubmissionDivision);
  if (const Ev* e = first(kSubmissionDivision); e && r.division != kClosed && r.division != kOpen)
    r.errors.push_back(at(*e) + "submission_division " + e->value.dump() + " is not closed or open");
  if (const Ev* e = first(kSubmissionStatus)) {
    std::string s = str_of(kSubmissionStatus);
    if (s != "cloud" && s != "onprem" && s != "preview" && s != "research")
      r.errors.push_back(at(*e) + "submission_status " + e->value.dump() + " is not cloud, onprem, preview or research");
  }
  r.benchmark = str_of(kSubmissionBenchmark);
  r.scale = "reference";
  if (const Ev* e = first(kSubmissionBenchmark)) {
    // Not a string, it would otherwise skip every check that needs the benchmark's spec.
    if (!e->value.is_string()) r.errors.push_back(at(*e) + "submission_benchmark value is not a string");
    if (e->metadata.contains(kScale)) {
      const auto& s = e->metadata.at(kScale);
      if (s.is_string())
        r.scale = s.get<std::string>();
      else
        r.errors.push_back(at(*e) + "submission_benchmark metadata scale is not a string");
    }
    if (std::find(std::begin(kOfficialBenchmarks), std::end(kOfficialBenchmarks), r.benchmark) ==
        std::end(kOfficialBenchmarks))
      r.warnings.push_back(at(*e) + "benchmark '" + r.benchmark +
                           "' is not a training 0.7.0 benchmark: the official checker rejects it");
  }
  const BenchmarkSpec* spec = r.benchmark.empty() ? nullptr : lookup(r.benchmark);
  if (!r.benchmark.empty() && !spec) r.errors.push_back("unknown benchmark '" + r.benchmark + "'");
  const ScaleSpec* target = nullptr;
  ScaleSpec lowered{};
  if (spec) {
    try {
      target = &find_scale(*spec, r.scale);
    } catch (const UserError& e) {
      r.errors.push_back(e.what());
    }
  }
  // A test-only lowered target (`train --test-target`) is logged on submission_benchmark and is
  // honoured only in the open division: a closed result always meets the table's target.
  if (const Ev* e = first(kSubmissionBenchmark); e && target && e->metadata.contains(kTestTarget)) {
    if (str_of(kSubmissionDivision) != kOpen) {
      r.errors.push_back(at(*e) + "a lowered test target is only allowed in the open division");
    } else if (e->metadata.at(kTestTarget).is_number()) {
      lowered = *target;
      lowered.target = e->metadata.at(kTestTarget).get<double>();
      for (double& t : lowered.more_targets) t = lowered.target;  // a test target lowers every part
      target = &lowered;
    } else {
      r.errors.push_back(at(*e) + "test_target is not a number");
    }
  }

  // ---- order ----
  Checker c(r);
  for (const auto& e : evs) c.order(e);
  // The result is run_stop - run_start, so inside that region time must not go backwards; outside
  // it a clock step is only suspicious.
  bool warned_backwards = false;
  for (size_t i = 1; i < evs.size(); ++i) {
    if (evs[i].time_ms >= evs[i - 1].time_ms) continue;
    const bool timed = c.run_start_ev && &evs[i - 1] >= c.run_start_ev && (!c.run_stop_ev || &evs[i] <= c.run_stop_ev);
    if (timed) {
      r.errors.push_back(at(evs[i]) + "time_ms goes backwards inside run_start..run_stop (" + fmt(evs[i - 1].time_ms) +
                         " ms, then " + fmt(evs[i].time_ms) + " ms)");
    } else if (!warned_backwards) {
      r.warnings.push_back(at(evs[i]) + "time_ms goes backwards");
      warned_backwards = true;
    }
  }

  // ---- dataset sizes ----
  if (target) {
    for (auto [k, want] : {std::pair{kTrainSamples, target->train_samples}, std::pair{kEvalSamples, target->eval_samples}})
      // 0: the size depends on the user's own files (translation at reference scale).
      if (const Ev* e = first(k); want > 0 && e && !(e->value.is_number_integer() && e->value.get<int64_t>() == want))
        r.errors.push_back(at(*e) + k + " = " + e->value.dump() + ", expected " + std::to_string(want) + " for " +
                           r.benchmark + " at scale " + r.scale);
  }

  // ---- result ----
  // Each eval_accuracy in the benchmark's form: one number, or an object of its metric's parts.
  std::vector<std::vector<double>> values;
  for (const Ev* e : c.accuracies) {
    std::optional<std::vector<double>> v;
    if (spec) v = logged_metric_values(spec->metric, e->value);
    else if (e->value.is_number()) v = std::vector<double>{e->value.get<double>()};
    if (v) {
      values.push_back(*v);
    } else {
      std::string want = "a number";
      if (spec && !spec->metric.parts.empty()) {
        want = "an object of";
        for (const std::string& p : spec->metric.parts) want += " \"" + p + "\"";
      }
      r.errors.push_back(at(*e) + "eval_accuracy " + e->value.dump() + " is not " + want);
      values.push_back({});
    }
  }
  const std::vector<double> last_values = values.empty() ? std::vector<double>{} : values.back();
  if (!last_values.empty()) r.final_accuracy = last_values[0];
  if (c.run_start_ev && c.run_stop_ev) r.run_seconds = (c.run_stop_ev->time_ms - c.run_start_ev->time_ms) / 1e3;
  if (c.run_stop_ev && c.run_stop_ev->metadata.contains(kStatus) && c.run_stop_ev->metadata.at(kStatus).is_string())
    r.status = c.run_stop_ev->metadata.at(kStatus).get<std::string>();
  // Every evaluation must lie in the metric's declared range (top-1 in [0, 1], BLEU in [0, 100]).
  if (spec)
    for (size_t i = 0; i < values.size(); ++i)
      for (double v : values[i])
        if (!(v >= spec->metric.min && v <= spec->metric.max))
          r.errors.push_back(at(*c.accuracies[i]) + "eval_accuracy " + fmt(v) + " is outside " + spec->name + "'s " +
                             spec->metric.name + " range [" + fmt(spec->metric.min) + ", " + fmt(spec->metric.max) +
                             "]");
  const bool reached = spec && target && !last_values.empty() &&
                       metric_values_reached(spec->metric, last_values, scale_targets(*target));
  if (r.status == kSuccess && target) {
    if (!r.final_accuracy)
      r.errors.push_back(at(*c.run_stop_ev) + "run_stop status success but no eval_accuracy logged");
    else if (!reached)
      r.errors.push_back(at(*c.run_stop_ev) + "run_stop status success but the last eval_accuracy " +
                         fmt_parts(spec->metric, last_values) + " does not reach the target " +
                         fmt_parts(spec->metric, scale_targets(*target)) + " (" + r.benchmark + ", " + r.scale + ")");
  }
  // As MLCommons' checker: a log must show the target reached. A run that stopped short is still
  // a complete log, and a result set may count one such run, as its dropped slowest (complete).
  bool stopped_short = false;
  if (r.status == kAborted) {
    if (reached) {
      r.warnings.push_back("run aborted although the last eval_accuracy reached the target");
    } else {
      stopped_short = true;
      r.errors.push_back(at(*c.run_stop_ev) + "run aborted without reaching the target: not a result on its own (a "
                         "result set may hold one such run, as its dropped slowest)");
    }
  }

  // ---- a resumed run (train --resume): its timed region did not start from scratch ----
  if (const Ev* e = first(kMlpdResumedFrom))
    r.errors.push_back(at(*e) + "the run was resumed from a checkpoint: not a valid MLPerf result");

  // ---- closed division: the hyperparameters ----
  if (r.division == kClosed && spec && target) {
    for (const auto& k : required_log_keys(*spec, str_of(kOptName))) exactly_once(k);
    // The logged events, over the whole resolved config (mlperf_dist_config) where the log has
    // one, so rows on keys MLPerf does not log (ncf's train_negatives) are checked too.
    json logged = json::object();
    for (const auto& e : evs)
      if (e.type == kPointInTime && !logged.contains(e.key)) logged[e.key] = e.value;
    if (const Ev* cfg = first(kMlpdConfig); cfg && cfg->value.is_object())
      for (const auto& [k, v] : cfg->value.items())
        if (!logged.contains(k)) logged[k] = v;
    for (const auto& v : check_rules(*spec, r.scale, logged)) {
      const Ev* e = first(v.key);
      r.errors.push_back((e ? at(*e) : std::string()) + v.message);
    }
  }

  r.ok = r.errors.empty();
  r.complete = r.errors.size() == (stopped_short ? 1u : 0u);
  r.converged = r.ok && r.status == kSuccess && reached;
  std::string s = path + ": " + (r.benchmark.empty() ? "?" : r.benchmark) + " " + r.scale + " " +
                  (r.division.empty() ? "?" : r.division) + ", status " + (r.status.empty() ? "?" : r.status);
  if (r.final_accuracy) {
    s += ", eval_accuracy " + (spec ? fmt_parts(spec->metric, last_values) : fmt(*r.final_accuracy));
    if (target)
      s += std::string(reached ? " reaches" : " does not reach") + " target " +
           fmt_parts(spec->metric, scale_targets(*target));
  }
  if (r.run_seconds) s += ", run " + fmt(*r.run_seconds) + " s";
  s += std::string(r.ok ? ": PASSED" : ": FAILED") + " (" + std::to_string(r.errors.size()) + " errors, " +
       std::to_string(r.warnings.size()) + " warnings)";
  r.summary = s;
  return r;
}

}  // namespace mlpd
