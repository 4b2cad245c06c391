// The scaling model's data as JSON: what `mlperf-dist scale` writes (scale.json) and `plan
// --profile` reads. Readers are strict: a missing field, a wrong type or an out-of-range value is a
// UserError (exit 2) naming the field, never a default.
//
// scale.json = {
//   "benchmark": "resnet", "scale": "mini", "mode": "weak" | "strong",
//   "points": [MeasuredStep...],  "comm": [CommSample...],
//   "grad_bytes": 4.4e6, "cores_per_node": 2,
//   "profile": ScalingProfile
// }
// MeasuredStep:   {"ranks", "ranks_per_node", "global_batch", "step_s", "compute_s", "comm_s",
//                  "skew_s", "other_s", "compute_cv", "comm_busy_s"}
// CommSample:     {"ranks", "ranks_per_node", "bytes", "seconds"}
// ScalingProfile: {"seconds_per_sample", "fixed_compute_s", "other_s", "grad_bytes",
//                  "overlap_fraction", "compute_cv", "cores_per_node", "threads_per_rank",
//                  "algo": "ring" | "tree" | "allgather" | "hierarchical",
//                  "intra": {"alpha_s", "beta_s_per_byte"}, "comm_fit_rms", "source"}
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scaling/cost_model.h"
#include "scaling/step_model.h"

namespace mlpd::scaling {

nlohmann::json to_json(const Link& l);
nlohmann::json to_json(const ScalingProfile& p);
nlohmann::json to_json(const MeasuredStep& m);
nlohmann::json to_json(const CommSample& c);
nlohmann::json to_json(const std::vector<MeasuredStep>& v);
nlohmann::json to_json(const std::vector<CommSample>& v);

// `where` prefixes the error message ("scale.json: profile").
ScalingProfile profile_from_json(const nlohmann::json& j, const std::string& where = "profile");
MeasuredStep measured_step_from_json(const nlohmann::json& j, const std::string& where = "point");
CommSample comm_sample_from_json(const nlohmann::json& j, const std::string& where = "comm sample");
std::vector<MeasuredStep> measured_steps_from_json(const nlohmann::json& j, const std::string& where = "points");
std::vector<CommSample> comm_samples_from_json(const nlohmann::json& j, const std::string& where = "comm");

struct ScaleFile {
  std::string benchmark;
  std::string scale;
  std::string mode;  // "weak" or "strong"
  std::vector<MeasuredStep> points;
  std::vector<CommSample> comm;
  double grad_bytes = 0.0;
  int cores_per_node = 0;
  ScalingProfile profile;
};
nlohmann::json to_json(const ScaleFile& f);
ScaleFile scale_file_from_json(const nlohmann::json& j, const std::string& where = "scale.json");
// Reads and parses `path`; UserError (exit 2) when it cannot be opened, is not JSON or is malformed.
ScaleFile read_scale_file(const std::string& path);

}  // namespace mlpd::scaling
