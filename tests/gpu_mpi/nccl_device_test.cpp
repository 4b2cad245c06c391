// The communicator over a ParamStore on the GPU (comm/communicator.h: device buckets reduced in
// place by NCCL on its own stream), at 1 and 2 ranks. Gradients are integer-valued, so every
// summation order gives the exact sum over ranks, and the check counts the wrong elements
// (nccl-tests' #wrong), which must be 0.
//
// Ordering is part of what is checked: each view's gradient is written by a copy queued on the
// compute stream just before its grad_ready (as backward writes it), and the result is read by a
// copy queued on the compute stream after grads_finish_step (as the optimizer reads it), with no
// host wait in between. A bucket reduced before its gradients landed, or read before its sum
// landed, shows up as wrong elements.
//
// Also comm-bench --device cuda (comm/bench/harness.h), its plain NCCL path and the bucketed path
// over a store on the GPU, checked the same way (#wrong, and a corrupted result is counted).
//
// Skips without a GPU. NCCL refuses two ranks on one GPU, so with fewer GPUs than ranks on the node
// it skips too, unless MLPD_TEST_NCCL_SHARED_GPU=1: then each rank tells NCCL it is a host of its
// own (NCCL_HOSTID) and NCCL goes through sockets over loopback: a test-only arrangement.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/bench/harness.h"
#include "comm/communicator.h"
#include "kernels/device.h"
#include "test_world.h"

using namespace mlpd;

namespace {

// Empty when this test can run on every rank; else why not (the same answer on every rank).
// Opens the process's GPU, as the trainer does (local_rank % GPUs).
std::string gpu_setup(const World& w) {
  const int gpus = cuda_device_count();
  const char* share = std::getenv("MLPD_TEST_NCCL_SHARED_GPU");
  const bool sharing = gpus < w.local_size && share && std::string(share) == "1";
  int mine = (gpus >= w.local_size || sharing) ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, w.comm);
  if (!all)
    return std::to_string(w.local_size) + " ranks on this node, " + std::to_string(gpus) +
           " GPU(s): NCCL needs a GPU per rank (MLPD_TEST_NCCL_SHARED_GPU=1 shares one through sockets)";
  if (sharing) {  // before the first NCCL call of this process
    setenv("NCCL_HOSTID", ("mlpd-test-rank-" + std::to_string(w.rank)).c_str(), 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    setenv("NCCL_IB_DISABLE", "1", 0);
  }
  open_device(Device::cuda, w.local_rank);
  return "";
}

long long on_all_ranks(const World& w, long long wrong) {
  long long all = 0;
  MPI_Allreduce(&wrong, &all, 1, MPI_LONG_LONG, MPI_SUM, w.comm);
  return all;
}

float ranks_sum(const World& w) { return static_cast<float>(w.size * (w.size + 1) / 2); }

// Odd view sizes, forward order, on the GPU; with the caps below, several buckets.
ParamStore device_store() {
  ParamStore s;
  const size_t sizes[] = {3, 4097, 300001, 17, 65536, 1000, 250007, 1, 70001};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "p%zu", i);
    add_param(s, name, sizes[i], ParamKind::weight);
  }
  finalize_params(s);
  place_store_on(s, Device::cuda);
  return s;
}

// `steps` training steps' worth of gradient reduction; returns the wrong elements over all ranks.
long long bucketed_steps_wrong(World& w, bool overlap, int steps, const std::string& backend = "auto") {
  ParamStore s = device_store();
  CommConfig cfg;
  cfg.backend = backend;
  cfg.bucket_mb = 0.5;         // 125000 floats
  cfg.first_bucket_mb = 0.05;  // the last views alone first
  cfg.overlap = overlap;
  auto c = make_communicator(w, cfg, s);
  EXPECT_GE(buckets(*c).size(), 4u) << describe(*c);
  if (w.rank == 0) std::printf("[ describe ] %s\n", describe(*c).c_str());

  const size_t n = s.param_count, bytes = n * sizeof(float);
  DeviceBytes src = alloc_on(Device::cuda, bytes);  // this rank's gradients of the step
  DeviceBytes out = alloc_on(Device::cuda, bytes);  // what the "optimizer" read
  std::vector<float> host(n);
  long long wrong = 0;
  for (int step = 0; step < steps; ++step) {
    const float scale = static_cast<float>(step + 1);
    for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(w.rank + 1) * static_cast<float>(i % 7 + 1) * scale;
    copy_to_device(Device::cuda, as<float>(src), host.data(), bytes);
    zero_grads(s);
    grads_begin_step(*c);
    for (size_t v = s.views.size(); v > 0; --v) {  // backward: the last view's gradient first
      const ParamView& view = s.views[v - 1];
      copy_within(Device::cuda, grad_ptr(s, v - 1), as<float>(src) + view.offset, view.count * sizeof(float));
      grad_ready(*c, s, v - 1);
    }
    grads_finish_step(*c, s);
    copy_within(Device::cuda, as<float>(out), grads_data(s), bytes);  // queued after the step, no host wait
    copy_to_host(Device::cuda, host.data(), as<float>(out), bytes);
    for (const ParamView& view : s.views)
      for (size_t i = view.offset; i < view.offset + view.count; ++i)
        wrong += host[i] != ranks_sum(w) * static_cast<float>(i % 7 + 1) * scale;
  }
  return on_all_ranks(w, wrong);
}

}  // namespace

TEST(NcclDevice, BucketedStepOnTheGpuSumsOverRanks) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  World& w = test_world();
  const std::string why = gpu_setup(w);
  if (!why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(bucketed_steps_wrong(w, /*overlap=*/true, 3), 0);
}

TEST(NcclDevice, BucketedStepOnTheGpuSumsOverRanksWithOverlapOff) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  World& w = test_world();
  const std::string why = gpu_setup(w);
  if (!why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(bucketed_steps_wrong(w, /*overlap=*/false, 2), 0);
}

// nccl named explicitly runs NCCL at one rank too (auto builds nothing there): the buckets,
// events and stream waits of a one-GPU overlap measurement (launch/gpu-check) really run.
TEST(NcclDevice, BucketedStepThroughNcclNamedRunsAtEveryRankCount) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  World& w = test_world();
  const std::string why = gpu_setup(w);
  if (!why.empty()) GTEST_SKIP() << why;
  ParamStore s = device_store();
  CommConfig cfg;
  cfg.backend = "nccl";
  EXPECT_NE(describe(*make_communicator(w, cfg, s)).find("(nccl)"), std::string::npos);
  EXPECT_EQ(bucketed_steps_wrong(w, /*overlap=*/true, 2, "nccl"), 0);
}

// A host store through the nccl backend (each bucket staged through the GPU).
TEST(NcclDevice, HostStoreBucketedSumOfIntegerDataIsExact) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  World& w = test_world();
  const std::string why = gpu_setup(w);
  if (!why.empty()) GTEST_SKIP() << why;
  ParamStore s;
  for (size_t n : {3u, 4097u, 300001u, 17u}) add_param(s, "p", n, ParamKind::weight);
  finalize_params(s);
  for (size_t i = 0; i < s.grads.size(); ++i) s.grads[i] = static_cast<float>((w.rank + 1) * (i % 7));
  CommConfig cfg;
  cfg.backend = "nccl";
  cfg.bucket_mb = 0.5;
  auto c = make_communicator(w, cfg, s);
  grads_begin_step(*c);
  for (size_t v = s.views.size(); v > 0; --v) grad_ready(*c, s, v - 1);
  grads_finish_step(*c, s);
  long long wrong = 0;
  for (const auto& v : s.views)
    for (size_t i = v.offset; i < v.offset + v.count; ++i) wrong += s.grads[i] != ranks_sum(w) * static_cast<float>(i % 7);
  std::vector<float> flat(1000003);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(w.rank + 1);
  allreduce_sum(*c, flat.data(), flat.size());
  for (float x : flat) wrong += x != ranks_sum(w);
  EXPECT_EQ(on_all_ranks(w, wrong), 0);
}

TEST(NcclDevice, AllreduceSumOnADeviceBufferAndOnAHostBuffer) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  World& w = test_world();
  const std::string why = gpu_setup(w);
  if (!why.empty()) GTEST_SKIP() << why;
  ParamStore s = device_store();
  auto c = make_communicator(w, CommConfig{}, s);

  const size_t n = 1000003, bytes = n * sizeof(float);
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(w.rank + 1) * static_cast<float>(i % 5 + 1);
  DeviceBytes d = alloc_on(Device::cuda, bytes);
  copy_to_device(Device::cuda, as<float>(d), host.data(), bytes);
  allreduce_sum_device(*c, as<float>(d), n);  // queued after the copy; the compute stream waits for it
  allreduce_sum_device(*c, as<float>(d), 1);  // a second one at once: element 0 summed again
  copy_to_host(Device::cuda, host.data(), as<float>(d), bytes);
  long long wrong = host[0] != static_cast<float>(w.size) * ranks_sum(w);
  for (size_t i = 1; i < n; ++i) wrong += host[i] != ranks_sum(w) * static_cast<float>(i % 5 + 1);
  EXPECT_EQ(on_all_ranks(w, wrong), 0) << "device buffer";

  std::vector<float> values(4099);  // host values through the same communicator (staged by nccl)
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(w.rank + 1) * static_cast<float>(i % 3);
  allreduce_sum(*c, values.data(), values.size());
  wrong = 0;
  for (size_t i = 0; i < values.size(); ++i) wrong += values[i] != ranks_sum(w) * static_cast<float>(i % 3);
  EXPECT_EQ(on_all_ranks(w, wrong), 0) << "host buffer";
}

TEST(NcclDevice, CommBenchOnTheGpuIsRightOnEveryPath) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  World& w = test_world();
  const std::string why = gpu_setup(w);
  if (!why.empty()) GTEST_SKIP() << why;
  auto sweep = [](const char* op) {  // 1K, 32K, 1M
    comm_bench::Options o;
    o.op = op;
    o.min_bytes = "1K";
    o.max_bytes = "1M";
    o.factor = 32;
    o.iters = 3;
    o.warmup = 1;
    o.device = "cuda";
    return o;
  };
  for (const char* op : {"allreduce", "broadcast", "reduce_scatter", "allgather"}) {
    const comm_bench::Report r = comm_bench::run_comm_bench(w, sweep(op));
    ASSERT_EQ(r.sizes.size(), 3u) << op;
    EXPECT_EQ(r.total_wrong, 0) << op;
    for (const auto& s : r.sizes) EXPECT_GT(s.time_us, 0) << op << " " << s.bytes;
  }
  comm_bench::Options o = sweep("allreduce");
  o.bucketed = true;  // at 1M four 256 KiB gradient views in several buckets
  o.bucket_mb = 0.5;
  EXPECT_EQ(comm_bench::run_comm_bench(w, o).total_wrong, 0) << "bucketed on the GPU";
  o.corrupt_for_test = true;
  EXPECT_EQ(comm_bench::run_comm_bench(w, o).total_wrong, 3) << "rank 0 altered one element of the result per size";
}
