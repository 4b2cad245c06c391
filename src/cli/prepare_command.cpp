#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/check.h"
#include "datasets/fashion_mnist.h"
#include "workloads/workload.h"

namespace mlpd::cli {

void add_prepare_command(CLI::App& app, PrepareArgs& a) {
  auto* c = app.add_subcommand("prepare", "Convert a workload's dataset into our HDF5 layout (outside any timed region)");
  c->add_option("--benchmark,-b", a.benchmark, "Workload whose data to prepare: resnet")->capture_default_str();
  c->add_option("--scale,-s", a.scale, "mini: from the installed Debian package; reference: from --from")
      ->check(CLI::IsMember({"mini", "reference"}))
      ->capture_default_str();
  c->add_option("--from", a.from,
                "Source of the raw data (mini resnet: the Fashion-MNIST IDX directory, default "
                "/usr/share/datasets/fashion-mnist from the Debian package dataset-fashion-mnist)");
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
  } else {
    throw UserError("prepare: no converter yet for benchmark '" + a.benchmark + "' at scale '" + a.scale +
                        "' (available: --benchmark resnet --scale mini)",
                    2);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("prepare: wrote %s in %.1f s\n", out.c_str(), s);
  return 0;
}

}  // namespace mlpd::cli
