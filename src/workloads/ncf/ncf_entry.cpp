// The ncf workload as the rest of the program sees it: MLPerf v0.5's NCF benchmark (NeuMF, HR@10
// over 999 sampled negatives), its rules rows, targets and MovieLens converter.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/check.h"
#include "datasets/movielens.h"
#include "mlperf/keys.h"
#include "workloads/ncf/ncf_config.h"
#include "workloads/registry.h"

namespace mlpd {

extern const std::string kNcfMiniDefaults;
extern const std::string kNcfReferenceDefaults;
std::unique_ptr<Workload> make_ncf_workload(const WorkloadContext& ctx, const nlohmann::json& config);

namespace {

using namespace keys;

constexpr const char* kOurs = "mlperf-dist: the valid range of the key";
constexpr const char* kV05Ncf = "MLPerf v0.5 NCF (reference: Adam, 4 training negatives, 999 eval negatives)";

constexpr const char* kDslabsHint =
    "install the Debian packages r-base-core and r-cran-dslabs (launch/install-deps does), or give the ratings CSV "
    "with --from";

// Exports the `movielens` table of r-cran-dslabs (MovieLens ml-latest-small) to csv with Rscript.
void export_dslabs_movielens(const std::string& csv) {
  if (std::system("command -v Rscript > /dev/null 2>&1") != 0)
    throw UserError(std::string("prepare ncf mini: Rscript not found; ") + kDslabsHint);
  for (char ch : csv)
    if (ch == '\'' || ch == '"' || ch == '\\')
      throw UserError("prepare ncf mini: the output path must not contain quotes or backslashes: " + csv);
  const std::string cmd =
      "Rscript -e 'suppressMessages(library(dslabs)); data(movielens); "
      "write.csv(movielens[, c(\"userId\", \"movieId\", \"rating\", \"timestamp\")], \"" +
      csv + "\", row.names = FALSE)' 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0)
    throw UserError("prepare ncf mini: Rscript failed to export dslabs::movielens (exit status " +
                    std::to_string(rc) + "); " + kDslabsHint);
}

void prepare_ncf(const PrepareRequest& a) {
  const std::string& out = a.output;
  MovieLensOptions o;
  o.scale = a.scale;
  std::string csv = a.from;
  std::string tmp_csv;
  if (a.scale == "mini") {
    o.licence = "MovieLens ml-latest-small (GroupLens, University of Minnesota): research use, no redistribution "
                "beyond the terms at https://grouplens.org/datasets/movielens/; as shipped by r-cran-dslabs (GPL-2+)";
    o.created_by = "mlperf-dist prepare --benchmark ncf --scale mini";
    if (csv.empty()) {
      namespace fs = std::filesystem;
      const fs::path dir = fs::path(out).has_parent_path() ? fs::path(out).parent_path() : fs::path(".");
      fs::create_directories(dir);
      tmp_csv = (dir / ("ncf_dslabs_movielens." + std::to_string(::getpid()) + ".csv")).string();
      spdlog::info("prepare: MovieLens ml-latest-small from r-cran-dslabs (Rscript) -> {}", tmp_csv);
      export_dslabs_movielens(tmp_csv);
      csv = tmp_csv;
      o.source = "MovieLens ml-latest-small ratings (the movielens table of the Debian package r-cran-dslabs, "
                 "exported with Rscript)";
    }
  } else {
    if (csv.empty())
      throw UserError("prepare ncf reference: give MovieLens-20M's ratings.csv with --from (from "
                      "https://grouplens.org/datasets/movielens/20m/)",
                      2);
    o.licence = "MovieLens-20M (GroupLens, University of Minnesota): research use under the GroupLens terms";
    o.created_by = "mlperf-dist prepare --benchmark ncf --scale reference";
  }
  if (o.source.empty()) o.source = "ratings CSV " + csv;
  spdlog::info("prepare: ratings {} -> {} (leave-one-out, {} eval negatives per user)", csv, out, o.eval_negatives);
  PreparedRatings r;
  try {
    r = prepare_movielens(csv, out, o);
  } catch (...) {
    if (!tmp_csv.empty()) std::filesystem::remove(tmp_csv);
    throw;
  }
  if (!tmp_csv.empty()) std::filesystem::remove(tmp_csv);
  spdlog::info("prepare: {} ratings, {} users, {} items, {} training positives, {} held out; {} users tied at their "
               "latest timestamp (larger item id held out), {} duplicate ratings dropped",
               r.ratings, r.users, r.items, r.train, r.users, r.tied_users, r.duplicates);
}

void check_ncf_data(const WorkloadContext& ctx) {
  check_movielens(workload_data_path(ctx.data_dir, kNcf, ctx.scale), ctx.scale);
}

WorkloadEntry make_entry() {
  WorkloadEntry e;
  BenchmarkSpec& s = e.spec;
  s.name = kNcf;
  s.summary = "recommendation: NeuMF on MovieLens-20M (reference) and ml-latest-small (mini), HR@10";
  s.metric = {"hr@10", kEvalAccuracy, "fraction", 0.0, 1.0, true, {"ndcg@10"}, {}};
  // train_samples = training positives (ratings - users), eval_samples = users (each ranked with
  // its 999 negatives). Reference: MovieLens-20M (20,000,263 ratings, 138,493 users). Mini:
  // ml-latest-small (100,004 ratings, 671 users); target calibrated in README.md.
  s.scales = {
      {"mini", kNcfMiniDefaults, 0.27, 99333, 671, "mlperf-dist mini (ml-latest-small HR@10, calibrated)", 10, {}, {}},
      {"reference", kNcfReferenceDefaults, 0.635, 19861770, 138493, "MLPerf v0.5 NCF (ml-20m HR@10)", 50, {}, {}},
  };
  // Epochs to target per seed (mini: our calibration, README.md). The reference scale has none:
  // NCF left MLPerf before RCPs existed (mlperf_logging's rcp_checker has no ncf file), so there
  // the RCP test is not applicable.
  // Three batches (only global_batch_size changed), so `plan` can interpolate epochs at mini scale.
  s.scales[0].rcps = {
      {2048, {7, 6, 5, 4, 3, 4, 3, 3, 4}, "src/workloads/ncf/README.md (9 of 10 seeds converged, 2 ranks)"},
      {4096, {4, 5, 4, 4, 6, 5, 5, 5, 5, 4}, "src/workloads/ncf/README.md (10 seeds, 2 ranks)"},
      {8192, {7, 9, 9, 7, 7, 7, 7, 5, 6, 8}, "src/workloads/ncf/README.md (10 seeds, 2 ranks)"}};
  s.rules = {
      {"*", "ncf.opt_name_adam_or_lazy_adam", {kOptName}, RuleKind::OneOf, {}, {kAdam, kLazyAdam}, {}, true, kV05Ncf},
      {"*", "ncf.lr_positive", {kOptBaseLearningRate}, RuleKind::AtLeast, {1e-12}, {}, {}, true, kV05Ncf},
      {"*", "ncf.adam_beta_1_at_least_0", {kOptAdamBeta1}, RuleKind::AtLeast, {0}, {}, {}, true, kV05Ncf},
      {"*", "ncf.adam_beta_1_below_1", {kOptAdamBeta1}, RuleKind::AtMost, {0.999999}, {}, {}, true, kV05Ncf},
      {"*", "ncf.adam_beta_2_at_least_0", {kOptAdamBeta2}, RuleKind::AtLeast, {0}, {}, {}, true, kV05Ncf},
      {"*", "ncf.adam_beta_2_below_1", {kOptAdamBeta2}, RuleKind::AtMost, {0.999999}, {}, {}, true, kV05Ncf},
      {"*", "ncf.adam_epsilon_positive", {kOptAdamEpsilon}, RuleKind::AtLeast, {1e-30}, {}, {}, true, kV05Ncf},
      {"*", "ncf.mf_dim_1_to_4096", {"mf_dim"}, RuleKind::AtLeast, {1}, {}, {}, false, kOurs},
      {"*", "ncf.mf_dim_1_to_4096", {"mf_dim"}, RuleKind::AtMost, {4096}, {}, {}, false, kOurs},
      // Not tunable in MLPerf's NCF: 4 training negatives per positive (a config key; not logged).
      {"*", "ncf.train_negatives_4", {kNcfTrainNegatives}, RuleKind::Equals, {4}, {}, {}, false, kV05Ncf},
  };
  s.closed_log_keys = {
      {kAdam, {kOptBaseLearningRate, kOptAdamBeta1, kOptAdamBeta2, kOptAdamEpsilon}},
      {kLazyAdam, {kOptBaseLearningRate, kOptAdamBeta1, kOptAdamBeta2, kOptAdamEpsilon}},
  };
  e.prepare_help = "a MovieLens ratings.csv (required at reference scale; at mini the default is the r-cran-dslabs "
                   "table exported with Rscript)";
  e.prepare = &prepare_ncf;
  e.check_config = &check_ncf_config;
  e.check_data = &check_ncf_data;
  e.make = &make_ncf_workload;
  return e;
}

}  // namespace

const WorkloadEntry& ncf_entry() {
  static const WorkloadEntry entry = make_entry();
  return entry;
}

}  // namespace mlpd
