// A scaling study as data: the scale.json that `mlperf-dist scale` writes, read and validated into
// plain structs for `report`, and where such files lie under a path.
//
// The fields read (the rest of the file, "points" and "comm" among them, is ignored):
//   top level  benchmark, scale (strings), mode ("weak" | "strong"), steps (whole, 0 when run to the
//              target), to_target (bool), cores_per_node (whole >= 0), grad_bytes (number >= 0),
//              runs (a non-empty array), profile (optional, any object: opaque, see ProfileEntry)
//   each run   ranks, ranks_per_node (whole >= 1), global_batch, step_s, compute_s, comm_s, skew_s,
//              other_s, throughput (numbers), status (string): required;
//              nodes, steps, skipped_steps, work_unit, device, comm_busy_s, compute_cv,
//              time_to_train_s, efficiency, predicted_step_s, error: optional.
// A file that is not JSON, lacks a required field or has one of the wrong type is a UserError
// (exit 2) whose message names the file and the field ("x/scale.json: runs[1]: step_s: missing").
// Unknown fields are ignored, so the writer may add some without breaking the reader.
//
// Units as in the file: times in seconds, efficiency and error as fractions (1 = 100%), throughput
// in work_unit per second over all ranks. Nothing here formats, except scale_table (below), which
// gives the one table both renderers show so that the page and the markdown agree.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlpd {

// One rank count of a study.
struct ScaleRun {
  int ranks = 0;
  int ranks_per_node = 0;
  std::optional<int> nodes;
  std::optional<long long> steps;          // timed steps (after the skipped warm-up)
  std::optional<long long> skipped_steps;  // warm-up steps left out of the means
  double global_batch = 0.0;
  std::string work_unit;  // "samples", "images", "tokens"; "" when the file has none
  std::string device;
  // The mean step and its split: compute + comm (waiting for gradients) + skew (waiting for the
  // slowest rank) + other (the optimizer update) is about step_s.
  double step_s = 0.0, compute_s = 0.0, comm_s = 0.0, skew_s = 0.0, other_s = 0.0;
  std::optional<double> comm_busy_s, compute_cv;
  double throughput = 0.0;
  std::string status;                      // "success", "aborted"
  std::optional<double> time_to_train_s;
  // (throughput / ranks) relative to the first run's: 1 is perfect weak (or strong) scaling. The
  // file's value; when it has none, computed here from global_batch / step_s against the first run.
  std::optional<double> efficiency;
  std::optional<double> predicted_step_s;  // the model's step time at this rank count
  std::optional<double> error;             // (predicted - measured) / measured, as the file says
  bool oversubscribed = false;             // ranks_per_node > the study's cores_per_node
};

// One entry of the study's "profile", flattened: nested objects give dotted keys ("intra.alpha_s").
// The profile's schema is the scaling model's and may change: it is shown as it is, not interpreted.
struct ProfileEntry {
  std::string key;
  std::optional<double> number;  // a JSON number
  std::string text;              // anything else, as text: a string, true/false, "[3 values]", "null"
};

struct ScaleStudy {
  std::string path;  // the scale.json read
  std::string benchmark, scale, mode;
  long long steps = 0;  // steps per rank count; 0 with to_target
  bool to_target = false;
  int cores_per_node = 0;
  double grad_bytes = 0.0;
  std::vector<ScaleRun> runs;  // in the file's order (ascending ranks)
  std::vector<ProfileEntry> profile;  // empty when the file has none
};

// `where` names the file in error messages.
ScaleStudy scale_study_from_json(const nlohmann::json& j, const std::string& where);
// Reads and validates `path`: UserError (exit 2) when it cannot be read, is not JSON or is malformed.
ScaleStudy read_scale_study(const std::string& path);

// Every file named scale.json under `path` (recursively, symlinked folders not followed), sorted by
// path; `path` itself when it is such a file. Empty when there is none, or `path` does not exist.
std::vector<std::string> find_scale_files(const std::string& path);

// The study's table as text, one row per run: `columns` names them, `rows[i]` are run i's cells.
// Times in ms, shares and errors in percent; time to train (s) and status only when to_target; the
// last column, "note", says "oversubscribed" where ScaleRun::oversubscribed.
struct ScaleTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};
ScaleTable scale_table(const ScaleStudy& s);
// "ncf mini, weak scaling, 30 steps per rank count" (or "..., each run to the target").
std::string scale_title(const ScaleStudy& s);

}  // namespace mlpd
