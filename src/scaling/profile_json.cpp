#include "scaling/profile_json.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/check.h"
#include "core/read_file.h"

namespace mlpd::scaling {

using nlohmann::json;

json to_json(const Link& l) { return {{"alpha_s", l.alpha_s}, {"beta_s_per_byte", l.beta_s_per_byte}}; }

json to_json(const ScalingProfile& p) {
  return {{"seconds_per_sample", p.seconds_per_sample},
          {"fixed_compute_s", p.fixed_compute_s},
          {"other_s", p.other_s},
          {"eval_s_per_sample", p.eval_s_per_sample},
          {"eval_every_epochs", p.eval_every_epochs},
          {"epoch_work", p.epoch_work},
          {"grad_bytes", p.grad_bytes},
          {"overlap_fraction", p.overlap_fraction},
          {"compute_cv", p.compute_cv},
          {"cores_per_node", p.cores_per_node},
          {"threads_per_rank", p.threads_per_rank},
          {"algo", algo_name(p.algo)},
          {"intra", to_json(p.intra)},
          {"has_inter", p.has_inter},
          {"inter", to_json(p.inter)},
          {"inter_fit_rms", p.inter_fit_rms},
          {"comm_fit_rms", p.comm_fit_rms},
          {"source", p.source}};
}

json to_json(const MeasuredStep& m) {
  return {{"ranks", m.ranks},
          {"ranks_per_node", m.ranks_per_node},
          {"global_batch", m.global_batch},
          {"step_s", m.step_s},
          {"compute_s", m.compute_s},
          {"comm_s", m.comm_s},
          {"skew_s", m.skew_s},
          {"other_s", m.other_s},
          {"eval_s", m.eval_s},
          {"eval_samples", m.eval_samples},
          {"eval_every_epochs", m.eval_every_epochs},
          {"steps_per_epoch", m.steps_per_epoch},
          {"compute_cv", m.compute_cv},
          {"comm_busy_s", m.comm_busy_s}};
}

json to_json(const CommSample& c) {
  return {{"ranks", c.ranks}, {"ranks_per_node", c.ranks_per_node}, {"bytes", c.bytes}, {"seconds", c.seconds}};
}

json to_json(const std::vector<MeasuredStep>& v) {
  json a = json::array();
  for (const MeasuredStep& m : v) a.push_back(to_json(m));
  return a;
}

json to_json(const std::vector<CommSample>& v) {
  json a = json::array();
  for (const CommSample& c : v) a.push_back(to_json(c));
  return a;
}

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& what) { throw UserError(where + ": " + what, 2); }

const json& field(const json& j, const std::string& where, const char* key) {
  if (!j.is_object()) bad(where, "expected a JSON object, got " + std::string(j.type_name()));
  auto it = j.find(key);
  if (it == j.end()) bad(where, std::string("field '") + key + "' is missing");
  return *it;
}

// A finite number >= lo (and <= hi).
double number(const json& j, const std::string& where, const char* key, double lo = 0.0,
              double hi = std::numeric_limits<double>::infinity()) {
  const json& v = field(j, where, key);
  if (!v.is_number()) bad(where, std::string("field '") + key + "' must be a number, got " + v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    std::ostringstream os;
    os << "field '" << key << "' = " << v.dump() << " is out of range [" << lo << ", " << hi << "]";
    bad(where, os.str());
  }
  return x;
}

int64_t integer(const json& j, const std::string& where, const char* key, int64_t lo) {
  const json& v = field(j, where, key);
  if (!v.is_number_integer()) bad(where, std::string("field '") + key + "' must be an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < lo) bad(where, std::string("field '") + key + "' = " + v.dump() + " must be >= " + std::to_string(lo));
  return x;
}

std::string text(const json& j, const std::string& where, const char* key) {
  const json& v = field(j, where, key);
  if (!v.is_string()) bad(where, std::string("field '") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

int small_int(const json& j, const std::string& where, const char* key, int64_t lo) {
  const int64_t x = integer(j, where, key, lo);
  if (x > std::numeric_limits<int>::max()) bad(where, std::string("field '") + key + "' is too large");
  return static_cast<int>(x);
}

}  // namespace

ScalingProfile profile_from_json(const json& j, const std::string& where) {
  ScalingProfile p;
  p.seconds_per_sample = number(j, where, "seconds_per_sample");
  p.fixed_compute_s = number(j, where, "fixed_compute_s");
  p.other_s = number(j, where, "other_s");
  // Optional (files written before evaluation was modelled): no evaluation cost.
  if (j.contains("eval_s_per_sample")) p.eval_s_per_sample = number(j, where, "eval_s_per_sample");
  if (j.contains("eval_every_epochs")) p.eval_every_epochs = small_int(j, where, "eval_every_epochs", 1);
  if (j.contains("epoch_work")) p.epoch_work = number(j, where, "epoch_work");
  p.grad_bytes = number(j, where, "grad_bytes");
  p.overlap_fraction = number(j, where, "overlap_fraction", 0.0, 1.0);
  p.compute_cv = number(j, where, "compute_cv");
  p.cores_per_node = small_int(j, where, "cores_per_node", 0);
  p.threads_per_rank = small_int(j, where, "threads_per_rank", 1);
  const std::string algo = text(j, where, "algo");
  const auto a = parse_algo(algo);
  if (!a) bad(where, "field 'algo' = \"" + algo + "\" is not one of " + algo_names_text());
  p.algo = *a;
  const json& intra = field(j, where, "intra");
  p.intra.alpha_s = number(intra, where + ".intra", "alpha_s");
  p.intra.beta_s_per_byte = number(intra, where + ".intra", "beta_s_per_byte");
  if (j.contains("has_inter") && j.at("has_inter").is_boolean() && j.at("has_inter").get<bool>()) {
    const json& inter = field(j, where, "inter");
    p.inter.alpha_s = number(inter, where + ".inter", "alpha_s");
    p.inter.beta_s_per_byte = number(inter, where + ".inter", "beta_s_per_byte");
    p.inter_fit_rms = number(j, where, "inter_fit_rms");
    p.has_inter = true;
  }
  p.comm_fit_rms = number(j, where, "comm_fit_rms");
  p.source = text(j, where, "source");
  if (!(p.seconds_per_sample > 0) && !(p.fixed_compute_s > 0))
    bad(where, "no compute: seconds_per_sample and fixed_compute_s are both 0");
  return p;
}

MeasuredStep measured_step_from_json(const json& j, const std::string& where) {
  MeasuredStep m;
  m.ranks = small_int(j, where, "ranks", 1);
  m.ranks_per_node = small_int(j, where, "ranks_per_node", 1);
  m.global_batch = integer(j, where, "global_batch", 1);
  m.step_s = number(j, where, "step_s");
  m.compute_s = number(j, where, "compute_s");
  m.comm_s = number(j, where, "comm_s");
  m.skew_s = number(j, where, "skew_s");
  m.other_s = number(j, where, "other_s");
  if (j.contains("eval_s")) m.eval_s = number(j, where, "eval_s");
  if (j.contains("eval_samples")) m.eval_samples = integer(j, where, "eval_samples", 0);
  if (j.contains("eval_every_epochs")) m.eval_every_epochs = small_int(j, where, "eval_every_epochs", 1);
  if (j.contains("steps_per_epoch")) m.steps_per_epoch = integer(j, where, "steps_per_epoch", 0);
  m.compute_cv = number(j, where, "compute_cv");
  m.comm_busy_s = number(j, where, "comm_busy_s");
  return m;
}

CommSample comm_sample_from_json(const json& j, const std::string& where) {
  CommSample c;
  c.ranks = small_int(j, where, "ranks", 1);
  c.ranks_per_node = small_int(j, where, "ranks_per_node", 1);
  c.bytes = number(j, where, "bytes");
  c.seconds = number(j, where, "seconds");
  return c;
}

std::vector<MeasuredStep> measured_steps_from_json(const json& j, const std::string& where) {
  if (!j.is_array()) bad(where, "expected an array, got " + std::string(j.type_name()));
  std::vector<MeasuredStep> v;
  for (size_t i = 0; i < j.size(); ++i)
    v.push_back(measured_step_from_json(j[i], where + "[" + std::to_string(i) + "]"));
  return v;
}

std::vector<CommSample> comm_samples_from_json(const json& j, const std::string& where) {
  if (!j.is_array()) bad(where, "expected an array, got " + std::string(j.type_name()));
  std::vector<CommSample> v;
  for (size_t i = 0; i < j.size(); ++i) v.push_back(comm_sample_from_json(j[i], where + "[" + std::to_string(i) + "]"));
  return v;
}

json to_json(const ScaleFile& f) {
  return {{"benchmark", f.benchmark},
          {"scale", f.scale},
          {"mode", f.mode},
          {"points", to_json(f.points)},
          {"comm", to_json(f.comm)},
          {"grad_bytes", f.grad_bytes},
          {"cores_per_node", f.cores_per_node},
          {"profile", to_json(f.profile)}};
}

ScaleFile scale_file_from_json(const json& j, const std::string& where) {
  ScaleFile f;
  f.benchmark = text(j, where, "benchmark");
  f.scale = text(j, where, "scale");
  f.mode = text(j, where, "mode");
  f.points = measured_steps_from_json(field(j, where, "points"), where + ": points");
  f.comm = comm_samples_from_json(field(j, where, "comm"), where + ": comm");
  f.grad_bytes = number(j, where, "grad_bytes");
  f.cores_per_node = small_int(j, where, "cores_per_node", 0);
  f.profile = profile_from_json(field(j, where, "profile"), where + ": profile");
  return f;
}

ScaleFile read_scale_file(const std::string& path) {
  const std::string text = read_whole_file(path, "--profile");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw UserError("--profile " + path + ": not valid JSON (" + e.what() + ")", 2);
  }
  return scale_file_from_json(j, path);
}

}  // namespace mlpd::scaling
