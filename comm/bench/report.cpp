#include "comm/bench/report.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "kernels/device.h"

namespace mlpd::comm_bench {

namespace {

// 8, 64K, 256M, 1G: the largest power-of-1024 unit that divides the size.
std::string human(size_t bytes) {
  char b[32];
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0)
    std::snprintf(b, sizeof b, "%zuG", bytes >> 30);
  else if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
    std::snprintf(b, sizeof b, "%zuM", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0)
    std::snprintf(b, sizeof b, "%zuK", bytes >> 10);
  else
    std::snprintf(b, sizeof b, "%zu", bytes);
  return b;
}

nlohmann::json size_json(const SizeResult& r, bool side_by_side) {
  nlohmann::json x = {{"size", r.bytes},  {"count", r.count}, {"time_us", r.time_us},
                      {"algbw", r.algbw}, {"busbw", r.busbw}, {"wrong", r.wrong}};
  if (side_by_side) {
    x["plain_time_us"] = r.plain_time_us;
    x["plain_busbw"] = r.plain_busbw;
    return x;
  }
  x["time_mean_us"] = r.time_mean_us;
  if (r.overlap_pct >= 0) {
    x["t_cpu_us"] = r.t_cpu_us;
    x["t_total_us"] = r.t_total_us;
    x["overlap_pct"] = r.overlap_pct;
  }
  return x;
}

}  // namespace

void print_header(const World& w, const Options& o, const Plan& p, double copy_gbps,
                  const std::string& comm_description, const std::string& gpu) {
  if (o.side_by_side) {
    std::printf(
        "# mlperf-dist comm-bench: allreduce side by side, %d ranks on %d node(s), %d iters, %d warm-up, %s; "
        "time = median over iterations of the slowest rank\n",
        w.size, w.nodes, o.iters, o.warmup, o.precision.c_str());
  } else {
    const std::string path = o.bucketed ? "bucketed (the trainer's path)" : "backend " + p.backend;
    std::printf(
        "# mlperf-dist comm-bench: op %s, %s, %d ranks on %d node(s), %d iters, %d warm-up, %s; "
        "time = median over iterations of the slowest rank\n",
        p.op->name, path.c_str(), w.size, w.nodes, o.iters, o.warmup, o.precision.c_str());
  }
  std::printf(
      "# copy bandwidth (one core, memcpy of 64 MiB): %.2f GB/s; goal for the trainer's path on 2 ranks: "
      "busbw >= 0.2 x copy = %.2f GB/s\n",
      copy_gbps, 0.2 * copy_gbps);
  if (o.side_by_side) {
    std::printf(
        "# side by side, alternating iterations: plain = MPI_Allreduce (out of place), trainer = bucketed path\n"
        "#%11s %12s %11s %11s %11s %11s %7s %8s\n",
        "size", "count", "plain(us)", "trainer(us)", "plain busbw", "trainer bus", "ratio", "#wrong");
    return;
  }
  if (!gpu.empty())
    std::printf("# buffers on the GPU: %s (one per rank); timed runs end when the GPU is done\n", gpu.c_str());
  if (!comm_description.empty()) std::printf("# %s\n", comm_description.c_str());
  std::printf("#%11s %12s %6s %12s %10s %10s %8s%s\n", "size", "count", "type", "time(us)", "algbw(GB/s)",
              "busbw(GB/s)", "#wrong", o.overlap ? "   t_cpu(us) t_total(us) overlap(%)" : "");
}

void print_row(const SizeResult& r) {
  std::printf(
      r.time_us < 10 ? "%12s %12zu %6s %12.2f %10.3f %10.3f %8lld" : "%12s %12zu %6s %12.1f %10.3f %10.3f %8lld",
      human(r.bytes).c_str(), r.count, "float", r.time_us, r.algbw, r.busbw, r.wrong);
  if (r.overlap_pct >= 0) std::printf("   %10.1f %11.1f %10.1f", r.t_cpu_us, r.t_total_us, r.overlap_pct);
  std::printf("\n");
  std::fflush(stdout);
}

void print_side_by_side_row(const SizeResult& r) {
  std::printf("%12s %12zu %11.2f %11.2f %11.3f %11.3f %7.2f %8lld\n", human(r.bytes).c_str(), r.count, r.plain_time_us,
              r.time_us, r.plain_busbw, r.busbw, r.plain_time_us / r.time_us, r.wrong);
  std::fflush(stdout);
}

void print_summary(long long total_wrong) {
  std::printf("# out of bounds values : %lld %s\n", total_wrong, total_wrong ? "ERROR" : "OK");
}

void write_json(const World& w, const Options& o, const Plan& p, const Report& report) {
  nlohmann::json j;
  j["copy_gbps"] = report.copy_gbps;
  j["op"] = p.op->name;
  j["backend"] = o.side_by_side ? "side-by-side" : o.bucketed ? "bucketed" : p.backend;
  j["device"] = device_name(p.device);
  if (!o.side_by_side) j["precision"] = o.precision;
  j["ranks"] = w.size;
  j["results"] = nlohmann::json::array();
  for (const SizeResult& r : report.sizes) j["results"].push_back(size_json(r, o.side_by_side));
  std::ofstream f(o.json);
  f << j.dump(1) << "\n";
  if (!f) throw UserError("cannot write " + o.json);
}

}  // namespace mlpd::comm_bench
