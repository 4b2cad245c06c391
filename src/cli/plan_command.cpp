// mlperf-dist plan: predicted time to train against the global batch at N ranks, and the batch to
// choose, from the scaling model in src/scaling/ (README.md there: the formulas and their sources).
// This file only maps the options onto the model's inputs and prints; every figure it uses comes
// from src/scaling/ (network presets, device figures) or from the workload registry (RCPs, epoch
// size).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "scaling/device.h"
#include "scaling/plan.h"
#include "scaling/profile_json.h"
#include "workloads/registry.h"

namespace mlpd::cli {

using namespace mlpd::scaling;

void add_plan_command(CLI::App& app, PlanArgs& a) {
  auto* c = app.add_subcommand("plan", "Predicted time-to-train against global batch at N ranks, and the batch to use");
  c->add_option("--benchmark", a.benchmark,
                "Workload (" + workload_list_text() + "); default: the --profile's, else resnet");
  c->add_option("--scale", a.scale, "mini or reference; default: the --profile's, else reference");
  c->add_option("--ranks,-n", a.ranks, "Ranks (GPUs or processes) to plan for")->required();
  c->add_option("--network", a.network,
                "Inter-node network: " + preset_names_text(inter_presets()) +
                    " (InfiniBand, one NIC per GPU) or host (the link fitted in --profile); default: host with "
                    "--profile, else 200g");
  c->add_option("--intra", a.intra,
                "Intra-node link: " + preset_names_text(intra_presets()) +
                    " or host; default: the device's (a100: nvlink3, h100: nvlink4), host with --profile");
  c->add_option("--device-profile", a.device_profile,
                "Published compute figure per device (reference scale, no --profile): a100 or h100")
      ->capture_default_str();
  c->add_option("--profile", a.profile, "scale.json written by `mlperf-dist scale` (its fitted profile)");
  c->add_option("--sweep", a.sweep,
                "Also print the best batch, step, efficiency and time to train at each of these rank counts "
                "(comma-separated, e.g. 8,16,32,64,128,256,512,1024)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 24));
  c->add_option("--batches", a.batches, "Candidate global batches (comma-separated), each a multiple of --ranks")
      ->delimiter(',');
  c->add_option("--ranks-per-node", a.ranks_per_node,
                "Ranks per node (default: 8 on presets, the profile's cores on host)")
      ->check(CLI::PositiveNumber);
  c->add_option("--max-per-rank-batch", a.max_per_rank_batch,
                "Largest per-rank batch of the default candidates (default: 256 with a device figure; with --profile, "
                "enough to reach the largest convergence point)")
      ->check(CLI::PositiveNumber);
  c->add_option("--algo", a.algo,
                "Allreduce: auto, ring, tree, hierarchical, allgather (auto: the profile's with "
                "--profile, else the fastest of ring/tree/hierarchical)")
      ->capture_default_str();
  c->add_option("--overlap", a.overlap,
                "Share of the allreduce hidden behind backward, 0..1 (default: the profile's; device figure: 0)")
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--compute-cv", a.compute_cv,
                "Coefficient of variation of a rank's compute per step (skew: the "
                "wait for the slowest rank); default: the profile's, device figure: 0")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--wire-bytes", a.wire_bytes,
                "Bytes per gradient element on the wire with a device figure "
                "(4: fp32 gradients, PyTorch AMP; 2: fp16/bf16)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--alpha-inter-us", a.alpha_inter_us, "Override: inter-node latency per message, us")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--gbps-inter", a.gbps_inter, "Override: inter-node line rate, Gb/s")->check(CLI::PositiveNumber);
  c->add_option("--efficiency-inter", a.efficiency_inter, "Override: inter-node busbw / line rate")
      ->check(CLI::Range(1e-6, 1.0));
  c->add_option("--alpha-intra-us", a.alpha_intra_us, "Override: intra-node latency per message, us")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--gbps-intra", a.gbps_intra, "Override: intra-node line rate, Gb/s (one direction)")
      ->check(CLI::PositiveNumber);
  c->add_option("--efficiency-intra", a.efficiency_intra, "Override: intra-node busbw / line rate")
      ->check(CLI::Range(1e-6, 1.0));
  c->add_option("--json", a.json, "Also write the plan as JSON to this file");
  c->footer(
      "Time to train(B) = epochs(B) x ceil(train_samples / B) x step(B): epochs from the benchmark's reference\n"
      "convergence points (interpolated inside them, McCandlish et al. 2018 outside), the step from the\n"
      "alpha-beta allreduce model and a compute profile (a published device figure, or `scale`'s fit).\nExamples:\n"
      "  mlperf-dist plan --benchmark resnet --scale reference --ranks 256 --network 200g\n"
      "  mlperf-dist plan --ranks 1024 --network 400g --device-profile h100 --batches 32768,65536\n"
      "  mlperf-dist plan --profile scale-results/scale.json --ranks 64      (the mini scale, this host's link)\n" +
      std::string(kExitCodesHelp));
}

namespace {

std::string fmtd(const char* f, double x) {
  char buf[96];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

// The command-line overrides on a preset.
LinkPreset overridden(LinkPreset p, double alpha_us, double gbps, double eff) {
  const bool changed = alpha_us >= 0 || gbps > 0 || eff > 0;
  if (alpha_us >= 0) p.alpha_us = alpha_us;
  if (gbps > 0) p.gbits_per_s = gbps;
  if (eff > 0) p.efficiency = eff;
  if (changed)
    p.source = fmtd("overridden on the command line: alpha %.2f us, ", p.alpha_us) +
               fmtd("%.0f Gb/s, ", p.gbits_per_s) + fmtd("efficiency %.2f; preset: ", p.efficiency) + p.source;
  return p;
}

Link overridden(Link l, double alpha_us, double gbps, double eff) {
  if (alpha_us >= 0) l.alpha_s = alpha_us * 1e-6;
  if (gbps > 0 || eff > 0) {
    const double e = eff > 0 ? eff : 1.0;
    const double g = gbps > 0 ? gbps : (l.beta_s_per_byte > 0 ? 8e-9 / l.beta_s_per_byte : 0.0);
    l.beta_s_per_byte = link_from_gbps(0, g, e).beta_s_per_byte;
  }
  return l;
}

void row(const char* what, const std::string& text) { std::printf("  %-14s %s\n", what, text.c_str()); }

}  // namespace

int run_plan_command(const PlanArgs& a) {
  if (a.ranks < 1) throw UserError("plan: --ranks must be >= 1, got " + std::to_string(a.ranks), kExitUsage);

  // Compute profile: a scale.json, or a published device figure.
  ScaleFile file;
  const bool have_file = !a.profile.empty();
  if (have_file) file = read_scale_file(a.profile);
  std::string benchmark = a.benchmark.empty() ? (have_file ? file.benchmark : "resnet") : a.benchmark;
  std::string scale = a.scale.empty() ? (have_file ? file.scale : "reference") : a.scale;
  if (have_file && (benchmark != file.benchmark || scale != file.scale))
    throw UserError("plan: --profile " + a.profile + " was measured for " + file.benchmark + " at scale " + file.scale +
                        ", not " + benchmark + " at scale " + scale,
                    kExitUsage);
  const WorkloadEntry& entry = find_workload(benchmark);
  const ScaleSpec& sc = find_scale(entry.spec, scale);
  if (sc.rcps.empty())
    throw UserError("plan: " + benchmark + " has no reference convergence points at scale " + scale +
                        ": no epochs-to-target to plan with",
                    kExitUsage);

  std::optional<AllreduceAlgo> algo;
  if (a.algo != "auto") {
    algo = parse_algo(a.algo);
    if (!algo) throw UserError("plan: unknown --algo '" + a.algo + "' (auto, " + algo_names_text() + ")", kExitUsage);
  }

  ScalingProfile profile;
  std::string compute_source, device_intra = "host";
  if (have_file) {
    profile = file.profile;
    compute_source = "--profile " + a.profile + ": " + profile.source;
  } else {
    if (scale != "reference")
      throw UserError("plan: the published device figures are for the reference scale; --scale " + scale +
                          " needs --profile scale.json from `mlperf-dist scale`",
                      kExitUsage);
    const DeviceFigure& dev = find_device_figure(benchmark, a.device_profile);
    profile = device_profile(dev, a.wire_bytes, AllreduceAlgo::ring);
    compute_source = profile.source;
    device_intra = dev.intra;
  }
  if (a.overlap >= 0) profile.overlap_fraction = a.overlap;
  if (a.compute_cv >= 0) profile.compute_cv = a.compute_cv;

  // Network.
  const std::string net_name = a.network.empty() ? (have_file ? "host" : "200g") : a.network;
  const std::string intra_name = a.intra.empty() ? device_intra : a.intra;
  const bool measured_link = profile.intra.alpha_s > 0 || profile.intra.beta_s_per_byte > 0;
  if ((net_name == "host" || intra_name == "host") && !measured_link)
    throw UserError(
        "plan: --network/--intra host needs a link measured by `mlperf-dist scale` (--profile with a fitted link)",
        kExitUsage);
  Network net;
  int rpn = a.ranks_per_node;
  if (net_name == "host") {
    if (rpn == 0) rpn = profile.cores_per_node > 0 ? profile.cores_per_node : 1;
    const std::string why = "fitted from --profile's comm-bench samples (" + std::string(algo_name(profile.algo)) +
                            fmtd(", RMS relative error %.3f)", profile.comm_fit_rms);
    if (profile.has_inter)
      net = measured_network(overridden(profile.intra, a.alpha_intra_us, a.gbps_intra, a.efficiency_intra),
                             overridden(profile.inter, a.alpha_inter_us, a.gbps_inter, a.efficiency_inter), rpn, why);
    else
      net = measured_network(overridden(profile.intra, a.alpha_inter_us, a.gbps_inter, a.efficiency_inter), rpn, why);
  } else {
    if (rpn == 0) rpn = 8;
    const LinkPreset inter =
        overridden(find_inter_preset(net_name), a.alpha_inter_us, a.gbps_inter, a.efficiency_inter);
    if (intra_name == "host") {
      net = make_network(inter, {"host", 0, 1, 1, ""}, rpn);
      net.intra = overridden(profile.intra, a.alpha_intra_us, a.gbps_intra, a.efficiency_intra);
      net.name = inter.name + " + host";
      net.source = "inter " + inter.name + " (" + describe_link(net.inter) + "): " + inter.source + "\nintra host (" +
                   describe_link(net.intra) + "): fitted from --profile's comm-bench samples";
    } else {
      const LinkPreset intra =
          overridden(find_intra_preset(intra_name), a.alpha_intra_us, a.gbps_intra, a.efficiency_intra);
      net = make_network(inter, intra, rpn);
    }
  }
  const int ranks_per_node = std::min(rpn, a.ranks);

  // Allreduce algorithm: explicit, the measured backend's, or the fastest at this size.
  std::string algo_note;
  if (algo) {
    profile.algo = *algo;
    algo_note = "--algo";
  } else if (have_file) {
    algo_note = "the backend measured by scale";
  } else {
    algo_note = "auto: the fastest at this size";
  }
  const auto algo_at = [&](int n) {
    return algo || have_file ? profile.algo
                             : fastest_algo(net.intra, net.inter, n, std::min(rpn, n), profile.grad_bytes);
  };
  profile.algo = algo_at(a.ranks);
  std::string algo_times;
  for (AllreduceAlgo x : {AllreduceAlgo::ring, AllreduceAlgo::tree, AllreduceAlgo::hierarchical})
    algo_times +=
        std::string(algo_times.empty() ? "" : ", ") + algo_name(x) +
        fmtd(" %.3f ms", 1e3 * allreduce_seconds(x, net.intra, net.inter, a.ranks, ranks_per_node, profile.grad_bytes));

  // The inputs at n ranks: everything but the ranks, their nodes, the algorithm (auto: the fastest
  // at n) and the candidate batches is the same for every n.
  const auto inputs_at = [&](int n) {
    PlanInputs in;
    in.benchmark = benchmark;
    in.scale = scale;
    // An epoch in the unit of the global batch: measured by `scale` where the profile has it (ncf's
    // batch counts its negatives too), else the scale's train_samples.
    in.train_samples =
        profile.epoch_work > 0 ? static_cast<int64_t>(std::llround(profile.epoch_work)) : sc.train_samples;
    in.eval_samples = sc.eval_samples;
    in.convergence = make_convergence(sc.rcps);
    in.profile = profile;
    in.profile.algo = algo_at(n);
    in.network = net;
    in.ranks = n;
    in.ranks_per_node = std::min(rpn, n);
    // A device's memory bounds its per-rank batch (256 images on a GPU); a measured host has no such
    // figure, so its candidates reach the largest convergence point.
    int max_per_rank = a.max_per_rank_batch;
    if (max_per_rank == 0) {
      max_per_rank = 256;
      if (have_file && !sc.rcps.empty())
        max_per_rank = static_cast<int>(std::max<int64_t>(256, sc.rcps.back().global_batch / n));
    }
    if (a.batches.empty()) {
      in.batches = default_batches(in.convergence, n, max_per_rank);
    } else if (n == a.ranks) {
      in.batches = a.batches;  // make_plan names a candidate that does not divide
    } else {
      for (int64_t b : a.batches)
        if (b >= n && b % n == 0) in.batches.push_back(b);
    }
    return in;
  };
  const PlanInputs in = inputs_at(a.ranks);
  if (in.train_samples < 1)
    throw UserError("plan: " + benchmark + " at scale " + scale + " has no fixed epoch size (train_samples)",
                    kExitUsage);
  const Plan plan = make_plan(in);

  const int nodes = (a.ranks + ranks_per_node - 1) / ranks_per_node;
  std::printf("plan: %s, scale %s, %d ranks (%d per node, %d node%s), network %s\n", benchmark.c_str(), scale.c_str(),
              a.ranks, ranks_per_node, nodes, nodes == 1 ? "" : "s", net.name.c_str());
  std::printf("inputs:\n");
  if (profile.epoch_work > 0)
    row("epoch", std::to_string(in.train_samples) + " units of the global batch (steps per epoch x batch, measured by "
                 "scale; the scale's train_samples: " + std::to_string(sc.train_samples) + ")");
  else
    row("epoch", std::to_string(sc.train_samples) + " samples (the scale's train_samples; " + sc.target_source + ")");
  row("convergence", in.convergence.summary);
  row("", "RCP source: " + in.convergence.rcps.front().source);
  row("compute",
      fmtd("%.4f ms per sample", profile.seconds_per_sample * 1e3) +
          fmtd(" + %.3f ms per step", profile.fixed_compute_s * 1e3) + fmtd(", other %.3f ms", profile.other_s * 1e3) +
          fmtd(", cv %.3f", profile.compute_cv) + (have_file || a.compute_cv >= 0 ? "" : " (assumed: no skew)") +
          (profile.cores_per_node > 0 ? ", " + std::to_string(profile.cores_per_node) + " cores per node" : ""));
  row("", compute_source);
  row("evaluation",
      profile.eval_s_per_sample > 0
          ? fmtd("%.3g ms per eval sample on one rank", profile.eval_s_per_sample * 1e3) + ", " +
                std::to_string(sc.eval_samples) + " samples every " + std::to_string(profile.eval_every_epochs) +
                " epoch(s)"
          : std::string("not counted (no figure: time to train is the training steps only)"));
  row("gradients", fmtd("%.1f MB per step", profile.grad_bytes / 1e6) +
                       fmtd(", %.0f%% of the allreduce hidden behind backward", profile.overlap_fraction * 100) +
                       (have_file || a.overlap >= 0 ? "" : " (assumed: no overlap)"));
  row("allreduce", std::string(algo_name(profile.algo)) + " (" + algo_note + "); one allreduce: " + algo_times);
  std::string src = net.source;
  const std::string indent = "\n                 ";
  for (size_t pos = 0; (pos = src.find('\n', pos)) != std::string::npos; pos += indent.size())
    src.replace(pos, 1, indent);
  row("network", src);
  std::printf("\n%s\n", format_plan_table(plan).c_str());
  std::printf("%s\n", plan.why.c_str());
  const PlanRow& best = plan.rows[plan.best];
  const std::vector<std::string> notes = batch_rule_notes(entry.spec, scale, best.global_batch, a.ranks);
  if (!notes.empty()) {
    std::printf("\nrules at global batch %lld:\n", static_cast<long long>(best.global_batch));
    for (const std::string& n : notes) std::printf("  %s\n", n.c_str());
    if (in.convergence.rcps.size() > 1)
      std::printf(
          "  (the RCP points each ran their own hyperparameters, listed in their source; the scale's\n"
          "   defaults are a starting point, not a tuned configuration for this batch)\n");
  }

  // Across rank counts: each its own best batch, everything else as above.
  nlohmann::json sweep = nlohmann::json::array();
  if (!a.sweep.empty()) {
    std::printf("\nacross rank counts (each at its own best batch; %s):\n", net.name.c_str());
    std::printf("  %7s %6s %-12s %9s %7s %7s %9s %8s %6s %10s  %s\n", "ranks", "nodes", "allreduce", "batch", "/rank",
                "epochs", "step ms", "comm ms", "eff %", "time min", "bound");
    for (int n : a.sweep) {
      const PlanInputs at = inputs_at(n);
      if (at.batches.empty()) {
        std::printf("  %7d  (no candidate batch divides over %d ranks)\n", n, n);
        continue;
      }
      const Plan p = make_plan(at);
      const PlanRow& r = p.rows[p.best];
      const int nodes_n = (n + at.ranks_per_node - 1) / at.ranks_per_node;
      std::printf("  %7d %6d %-12s %9lld %7.0f %7.2f %9.3f %8.3f %6.1f %10.2f  %s%s\n", n, nodes_n,
                  algo_name(at.profile.algo), static_cast<long long>(r.global_batch), r.step.per_rank_batch,
                  r.epochs.epochs, r.step.total_s * 1e3, r.step.comm_s * 1e3, r.step.efficiency * 100, r.time_s / 60,
                  bound_name(r.bound), r.past_critical ? ", past the critical batch" : "");
      sweep.push_back({{"ranks", n},
                       {"nodes", nodes_n},
                       {"algo", algo_name(at.profile.algo)},
                       {"global_batch", r.global_batch},
                       {"epochs", r.epochs.epochs},
                       {"step_s", r.step.total_s},
                       {"comm_s", r.step.comm_s},
                       {"efficiency", r.step.efficiency},
                       {"time_to_train_s", r.time_s},
                       {"bound", bound_name(r.bound)}});
    }
  }

  if (!a.json.empty()) {
    nlohmann::json j = plan_to_json(plan);
    j["rules_at_chosen_batch"] = notes;
    j["compute_source"] = compute_source;
    if (!a.sweep.empty()) j["sweep"] = sweep;
    const std::string text = j.dump(2) + "\n";
    try {
      write_file_atomically(a.json, text.data(), text.size());
    } catch (const std::exception& e) {
      throw UserError("plan: --json " + a.json + ": " + e.what(), kExitUsage);
    }
  }
  return kExitSuccess;
}

}  // namespace mlpd::cli
