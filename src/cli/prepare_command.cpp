#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/check.h"
#include "workloads/registry.h"

namespace mlpd::cli {

void add_prepare_command(CLI::App& app, PrepareArgs& a) {
  auto* c = app.add_subcommand("prepare", "Convert a workload's dataset into our HDF5 layout (outside any timed region)");
  c->footer(kExitCodesHelp);
  c->add_option("--benchmark,-b", a.benchmark, "Workload whose data to prepare: " + workload_list_text())
      ->check(CLI::IsMember(workload_names()))
      ->capture_default_str();
  c->add_option("--scale,-s", a.scale, "mini: from installed Debian packages; reference: from --from")
      ->check(CLI::IsMember({"mini", "reference"}))
      ->capture_default_str();
  std::string from_help = "Source of the raw data, per workload:";
  for (const WorkloadEntry* e : workload_entries())
    if (e->prepare) from_help += "\n  " + e->spec.name + ": " + e->prepare_help;
  c->add_option("--from", a.from, from_help);
  c->add_option("--from-parallel", a.from_parallel,
                "Translation (reference): the training corpus as two plain-text files, one sentence a line")
      ->expected(2)
      ->type_name("FILE");
  c->add_option("--test-parallel", a.test_parallel,
                "Translation: the held-out test pair of files (e.g. newstest2014); without it the split rule applies")
      ->expected(2)
      ->type_name("FILE");
  c->add_option("--vocab-size", a.vocab_size, "Translation: BPE vocabulary size (0: 4000 at mini, 32000 at reference)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--coco", a.coco_dir,
                "Detection (ssd) at reference scale: the COCO 2017 directory (annotations/, train2017/, val2017/)")
      ->check(CLI::ExistingDirectory);
  c->add_option("--image-size", a.image_size, "Detection: square size the COCO images are resized to (0: 300 for ssd)")
      ->check(CLI::Range(0, 2048));
  c->add_option("--output,-o", a.output, "Output HDF5 file (default <data-dir>/<benchmark>_<scale>.h5)");
  c->add_option("--data-dir", a.data_dir, "Directory of prepared datasets")->capture_default_str();
  c->add_flag("--force", a.force, "Rebuild even if the output exists");
}

int run_prepare_command(const PrepareArgs& a) {
  const WorkloadEntry& entry = find_workload(a.benchmark);
  find_scale(entry.spec, a.scale);
  if (!entry.prepare) {
    spdlog::info("prepare: {} needs no prepared data", a.benchmark);
    return kExitSuccess;
  }
  const std::string out = a.output.empty() ? workload_data_path(a.data_dir, a.benchmark, a.scale) : a.output;
  if (!a.force && std::filesystem::exists(out)) {
    spdlog::info("{} exists; use --force to rebuild it", out);
    return kExitSuccess;
  }
  auto t0 = std::chrono::steady_clock::now();
  PrepareRequest request;
  request.scale = a.scale;
  request.from = a.from;
  request.output = out;
  if (a.from_parallel.size() == 2) {
    request.from_parallel_src = a.from_parallel[0];
    request.from_parallel_tgt = a.from_parallel[1];
  }
  if (a.test_parallel.size() == 2) {
    request.test_parallel_src = a.test_parallel[0];
    request.test_parallel_tgt = a.test_parallel[1];
  }
  request.vocab_size = a.vocab_size;
  request.coco_dir = a.coco_dir;
  request.image_size = a.image_size;
  entry.prepare(request);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("prepare: wrote {} in {:.1f} s", out, s);
  return kExitSuccess;
}

}  // namespace mlpd::cli
