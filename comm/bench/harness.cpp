#include "comm/bench/harness.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "comm/bench/path.h"
#include "comm/bench/plan.h"
#include "comm/bench/report.h"
#include "comm/bench/timing.h"
#include "comm/collectives.h"
#include "comm/watchdog.h"
#include "kernels/device.h"

namespace mlpd::comm_bench {

namespace {

// The NCCL communicator of the nccl path, one for the whole sweep, destroyed on every way out.
struct NcclContext {
  nccl::Ctx* ctx = nullptr;
  NcclContext(const World& w, bool wanted) {
#ifdef MLPD_HAVE_NCCL
    if (wanted) ctx = nccl::create(w.comm, w.local_rank);
#else
    (void)w, (void)wanted;  // plan_bench refuses --device cuda in a build without it
#endif
  }
  ~NcclContext() {
#ifdef MLPD_HAVE_NCCL
    if (ctx) nccl::destroy(ctx);
#endif
  }
  NcclContext(const NcclContext&) = delete;
  NcclContext& operator=(const NcclContext&) = delete;
};

double gbps(size_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

// Each iteration is timed alone: the in-place paths need their inputs rewritten (untimed), and
// the barrier keeps the fill's skew between ranks out of the collective's time.
double time_once(SizeRun& r) {
  fill_inputs(r);
  barrier(*r.world);
  const double t0 = MPI_Wtime();
  run_once(r);
  return MPI_Wtime() - t0;
}

long long wrong_on_all_ranks(const World& w, int64_t wrong_here) {
  allreduce_sum_i64(w, &wrong_here, 1);
  return wrong_here;
}

// Overlap, OSU style: the compute kernel alone, then the collective overlapped with it.
// overlap % = 100 * (1 - (t_total - t_compute) / t_comm), clipped to 0..100.
void measure_overlap(World& w, const Options& o, ComputeKernel& cpu, SizeRun& r, SizeResult& res) {
  const double compute_us = o.compute_us > 0 ? o.compute_us : res.time_us;
  const double iters = compute_us * cpu.iters_per_us;
  const size_t n = static_cast<size_t>(std::max(5, o.iters));
  std::vector<double> compute(n), total(n);
  for (size_t i = 0; i < n; ++i) {
    barrier(w);
    double t0 = MPI_Wtime();
    cpu.run(iters);
    compute[i] = MPI_Wtime() - t0;
    fill_inputs(r);
    barrier(w);
    t0 = MPI_Wtime();
    run_overlapped(r, cpu, iters);
    total[i] = MPI_Wtime() - t0;
  }
  res.wrong += wrong_on_all_ranks(w, count_wrong(r, o.corrupt_for_test));
  res.t_cpu_us = median_of_slowest(w, compute) * 1e6;
  res.t_total_us = median_of_slowest(w, total) * 1e6;
  res.overlap_pct = 100.0 * std::clamp(1.0 - (res.t_total_us - res.t_cpu_us) / res.time_us, 0.0, 1.0);
}

SizeResult measure_size(World& w, const Options& o, const Plan& p, nccl::Ctx* nccl_ctx, ComputeKernel& cpu,
                        size_t count) {
  auto r = open_size(w, *p.op, p.path, p.device, p.cfg, nccl_ctx, count);
  SizeResult res;
  res.count = count;
  res.bytes = count * sizeof(float);
  for (int i = 0; i < o.warmup; ++i) time_once(*r);
  std::vector<double> times(static_cast<size_t>(o.iters));
  for (double& t : times) t = time_once(*r);
  res.wrong = wrong_on_all_ranks(w, count_wrong(*r, o.corrupt_for_test));
  double mean = 0;
  const double t = median_of_slowest(w, times, &mean);
  res.time_us = t * 1e6;
  res.time_mean_us = mean * 1e6;
  res.algbw = gbps(res.bytes, t);
  res.busbw = res.algbw * p.op->bus_factor(w.size);
  if (o.overlap && overlappable(*r)) measure_overlap(w, o, cpu, *r, res);
  return res;
}

// Plain MPI_Allreduce and the trainer's bucketed path, alternating iterations: a noisy machine
// slows both alike.
SizeResult measure_side_by_side(World& w, const Options& o, const Plan& p, size_t count) {
  std::unique_ptr<SizeRun> runs[2] = {open_size(w, kAllreduce, PathKind::mpi, Device::cpu, p.cfg, nullptr, count),
                                      open_size(w, kAllreduce, PathKind::bucketed, Device::cpu, p.cfg, nullptr, count)};
  std::vector<double> times[2];
  for (int i = 0; i < o.warmup + o.iters; ++i)
    for (int k = 0; k < 2; ++k) {
      const double dt = time_once(*runs[k]);
      if (i >= o.warmup) times[k].push_back(dt);
    }
  SizeResult res;
  res.count = count;
  res.bytes = count * sizeof(float);
  res.wrong =
      wrong_on_all_ranks(w, count_wrong(*runs[0], o.corrupt_for_test) + count_wrong(*runs[1], o.corrupt_for_test));
  const double plain = median_of_slowest(w, times[0]), trainer = median_of_slowest(w, times[1]);
  const double bus = kAllreduce.bus_factor(w.size);
  res.time_us = trainer * 1e6;
  res.algbw = gbps(res.bytes, trainer);
  res.busbw = res.algbw * bus;
  res.plain_time_us = plain * 1e6;
  res.plain_busbw = gbps(res.bytes, plain) * bus;
  return res;
}

// Watchdog test: rank test_hang_rank skips one collective: with --bucketed a bucketed gradient
// step, otherwise a blocking allreduce of comm/collectives.h. The watchdog ends the other ranks.
void run_hang_test(World& w, const Options& o, const Plan& p) {
  ParamStore s;
  add_param(s, "w", 1 << 20, ParamKind::weight);
  finalize_params(s);
  auto c = make_communicator(w, p.cfg, s);
  barrier(w);
  if (w.rank == o.test_hang_rank) {
    sleep(static_cast<unsigned>(3 * o.comm_timeout + 30));
  } else if (o.bucketed) {
    grads_begin_step(*c);
    grad_ready(*c, s, 0);
    grads_finish_step(*c, s);
  } else {
    allreduce_sum_floats(w, s.grads.data(), s.grads.size());
  }
}

}  // namespace

void check_options(const Options& o, const World& w) { plan_bench(o, w); }

Report run_comm_bench(World& w, const Options& o) {
  const Plan p = plan_bench(o, w);
  set_comm_timeout(o.comm_timeout);
  if (o.test_hang_rank >= 0) {
    run_hang_test(w, o, p);
    return {};
  }

  Report report;
  if (w.rank == 0) report.copy_gbps = measure_copy_gbps();
  broadcast_bytes(w, &report.copy_gbps, sizeof report.copy_gbps, 0);
  ComputeKernel cpu;
  cpu.calibrate();
  std::string gpu;  // the GPU's description, for the header
  if (p.device == Device::cuda) gpu = open_device(Device::cuda, w.local_rank).description;
  NcclContext nccl_context(w, p.path == PathKind::nccl);

  std::string comm_description;
  if (!o.side_by_side && (p.path == PathKind::bucketed || p.path == PathKind::communicator)) {
    ParamStore empty;  // no views, on the path's device
    if (p.device == Device::cuda) {
      finalize_params(empty);
      place_store_on(empty, Device::cuda);
    }
    auto probe = make_communicator(w, p.cfg, empty);  // collective: every rank makes it
    comm_description = describe(*probe);
  }
  if (w.rank == 0) print_header(w, o, p, report.copy_gbps, comm_description, gpu);

  for (size_t count : p.counts) {
    const SizeResult r =
        o.side_by_side ? measure_side_by_side(w, o, p, count) : measure_size(w, o, p, nccl_context.ctx, cpu, count);
    if (w.rank == 0) {
      if (o.side_by_side)
        print_side_by_side_row(r);
      else
        print_row(r);
    }
    report.sizes.push_back(r);
    report.total_wrong += r.wrong;
  }
  if (w.rank == 0) {
    print_summary(report.total_wrong);
    if (!o.json.empty()) write_json(w, o, p, report);
  }
  return report;
}

}  // namespace mlpd::comm_bench
