#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/commands.h"
#include "core/check.h"
#include "datasets/fashion_mnist.h"
#include "datasets/movielens.h"
#include "workloads/workload.h"

namespace mlpd::cli {

namespace {

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

void prepare_ncf(const PrepareArgs& a, const std::string& out) {
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
      std::printf("prepare: MovieLens ml-latest-small from r-cran-dslabs (Rscript) -> %s\n", tmp_csv.c_str());
      std::fflush(stdout);
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
  std::printf("prepare: ratings %s -> %s (leave-one-out, %d eval negatives per user)\n", csv.c_str(), out.c_str(),
              o.eval_negatives);
  std::fflush(stdout);
  PreparedRatings r;
  try {
    r = prepare_movielens(csv, out, o);
  } catch (...) {
    if (!tmp_csv.empty()) std::filesystem::remove(tmp_csv);
    throw;
  }
  if (!tmp_csv.empty()) std::filesystem::remove(tmp_csv);
  std::printf("prepare: %lld ratings, %lld users, %lld items, %lld training positives, %lld held out; %lld users "
              "tied at their latest timestamp (larger item id held out), %lld duplicate ratings dropped\n",
              static_cast<long long>(r.ratings), static_cast<long long>(r.users), static_cast<long long>(r.items),
              static_cast<long long>(r.train), static_cast<long long>(r.users), static_cast<long long>(r.tied_users),
              static_cast<long long>(r.duplicates));
}

}  // namespace

void add_prepare_command(CLI::App& app, PrepareArgs& a) {
  auto* c = app.add_subcommand("prepare", "Convert a workload's dataset into our HDF5 layout (outside any timed region)");
  c->add_option("--benchmark,-b", a.benchmark, "Workload whose data to prepare: resnet or ncf")->capture_default_str();
  c->add_option("--scale,-s", a.scale, "mini: from the installed Debian package; reference: from --from")
      ->check(CLI::IsMember({"mini", "reference"}))
      ->capture_default_str();
  c->add_option("--from", a.from,
                "Source of the raw data (mini resnet: the Fashion-MNIST IDX directory, default "
                "/usr/share/datasets/fashion-mnist from the Debian package dataset-fashion-mnist; ncf: a MovieLens "
                "ratings.csv, required at reference scale, at mini default the r-cran-dslabs table via Rscript)");
  c->add_option("--output,-o", a.output, "Output HDF5 file (default <data-dir>/<benchmark>_<scale>.h5)");
  c->add_option("--data-dir", a.data_dir, "Directory of prepared datasets")->capture_default_str();
  c->add_flag("--force", a.force, "Rebuild even if the output exists");
}

int run_prepare_command(const PrepareArgs& a) {
  const std::string out = a.output.empty() ? workload_data_path(a.data_dir, a.benchmark, a.scale) : a.output;
  if (!a.force && std::filesystem::exists(out)) {
    std::printf("%s exists; use --force to rebuild it\n", out.c_str());
    return 0;
  }
  auto t0 = std::chrono::steady_clock::now();
  if (a.benchmark == "resnet" && a.scale == "mini") {
    const std::string src = a.from.empty() ? "/usr/share/datasets/fashion-mnist" : a.from;
    std::printf("prepare: Fashion-MNIST from %s -> %s\n", src.c_str(), out.c_str());
    std::fflush(stdout);
    prepare_fashion_mnist(src, out);
  } else if (a.benchmark == "ncf") {
    prepare_ncf(a, out);
  } else {
    throw UserError("prepare: no converter yet for benchmark '" + a.benchmark + "' at scale '" + a.scale +
                        "' (available: --benchmark resnet --scale mini, --benchmark ncf [--scale reference --from ratings.csv])",
                    2);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("prepare: wrote %s in %.1f s\n", out.c_str(), s);
  return 0;
}

}  // namespace mlpd::cli
