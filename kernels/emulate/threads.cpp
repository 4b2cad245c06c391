// The emulator's thread scheduler: each block's threads are fibers on the launching thread, run
// in turn until each finishes or waits at a barrier; a barrier opens when every live thread of its
// block (or warp) waits at it. Blocks run one after another. A block whose threads all wait at
// different barriers is a deadlock on a GPU too: the launch aborts with the kernel's barrier
// counts. A fiber switch is a few instructions (below): ucontext's swapcontext makes a system call
// per switch, and a launch switches twice per thread at least.
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define MLPD_EMULATE_ASAN 1
#endif

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

#include "kernels/emulate/cuda_emulate.h"
#include "kernels/emulate/runtime_state.h"

#if !defined(__x86_64__)
#error "the CUDA emulator's fiber switch is written for x86-64"
#endif

// switch_stack(&save, next): saves the callee-saved registers on this stack, stores the stack
// pointer in *save, and resumes the fiber whose stack pointer is `next` (System V x86-64 ABI).
extern "C" void mlpd_emulate_switch_stack(void** save, void* next);
asm(R"(
  .text
  .globl mlpd_emulate_switch_stack
  .type mlpd_emulate_switch_stack, @function
mlpd_emulate_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size mlpd_emulate_switch_stack, .-mlpd_emulate_switch_stack
)");

namespace mlpd_emulate {

uint3 g_thread_idx, g_block_idx;
dim3 g_block_dim, g_grid_dim;

namespace {

constexpr size_t kStackBytes = 256 * 1024;  // a kernel's locals (tiles of registers) live here
constexpr unsigned kMaxThreads = 1024;

enum class State { runnable, at_block_barrier, at_warp_barrier, done };

struct Fiber {
  void* sp = nullptr;    // saved stack pointer while switched out
  void* fake = nullptr;  // AddressSanitizer's fake stack of the fiber while switched out
  State state = State::runnable;
  uint3 idx{};
};

struct BlockRun {
  std::vector<Fiber> fibers;
  std::vector<uint64_t> slots;  // warp exchange: one per thread
  void* scheduler_sp = nullptr;
  int current = -1;
  void (*body)(void*) = nullptr;
  void* ctx = nullptr;
};

BlockRun g_run;
char* g_stacks = nullptr;
std::vector<unsigned char> g_dynamic_shared;
std::recursive_mutex g_launch_mutex;  // one launch at a time in the process
unsigned g_launch_parity = 0;

// The switches, told to AddressSanitizer when it is built in (it must know which stack runs).
#ifdef MLPD_EMULATE_ASAN
void* g_scheduler_fake = nullptr;
const void* g_scheduler_bottom = nullptr;
size_t g_scheduler_size = 0;
#endif

void switch_to_fiber(Fiber& f, unsigned t) {
#ifdef MLPD_EMULATE_ASAN
  __sanitizer_start_switch_fiber(&g_scheduler_fake, g_stacks + size_t(t) * kStackBytes, kStackBytes);
#else
  (void)t;
#endif
  mlpd_emulate_switch_stack(&g_run.scheduler_sp, f.sp);
#ifdef MLPD_EMULATE_ASAN
  __sanitizer_finish_switch_fiber(g_scheduler_fake, nullptr, nullptr);
#endif
}

void switch_to_scheduler(Fiber& f, bool finished) {
#ifdef MLPD_EMULATE_ASAN
  __sanitizer_start_switch_fiber(finished ? nullptr : &f.fake, g_scheduler_bottom, g_scheduler_size);
#else
  (void)finished;
#endif
  mlpd_emulate_switch_stack(&f.sp, g_run.scheduler_sp);
#ifdef MLPD_EMULATE_ASAN
  __sanitizer_finish_switch_fiber(f.fake, &g_scheduler_bottom, &g_scheduler_size);
#endif
}

// A fiber's first frame, entered by the switch's `ret`; it never returns.
void fiber_main() {
#ifdef MLPD_EMULATE_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g_scheduler_bottom, &g_scheduler_size);
#endif
  const int index = g_run.current;
  g_run.body(g_run.ctx);
  Fiber& f = g_run.fibers[size_t(index)];
  f.state = State::done;
  switch_to_scheduler(f, true);
  die("a finished fiber resumed");
}

// A fresh stack for thread t whose first switch `ret`s into fiber_main with the stack aligned as
// after a call (rsp + 8 a multiple of 16).
void* fresh_stack(unsigned t) {
  char* top = g_stacks + (size_t(t) + 1) * kStackBytes;
  auto* sp = reinterpret_cast<void**>(top - 64);  // 16-aligned; fiber_main's frame starts 8 below a multiple of 16
  *--sp = nullptr;                                // never used: fiber_main does not return
  *--sp = reinterpret_cast<void*>(&fiber_main);   // `ret` target
  for (int r = 0; r < 6; ++r) *--sp = nullptr;    // rbp rbx r12 r13 r14 r15
  return sp;
}

int current_fiber_index() {
  if (g_run.current < 0) die("a barrier or warp collective outside a kernel");
  return g_run.current;
}

Fiber& current_fiber() { return g_run.fibers[size_t(current_fiber_index())]; }

void wait_at(State s) {
  Fiber& f = current_fiber();
  f.state = s;
  switch_to_scheduler(f, false);
}

void run_block(unsigned threads) {
  const unsigned bx = g_block_dim.x, by = g_block_dim.y;
  if (threads == 1) {
    g_run.current = 0;
    g_run.fibers.resize(1);
    g_run.fibers[0].state = State::runnable;
    g_thread_idx = uint3{0, 0, 0};
    // A one-thread block needs no fiber: its barriers open at once.
    g_run.body(g_run.ctx);
    g_run.current = -1;
    return;
  }
  g_run.fibers.resize(threads);
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = g_run.fibers[t];
    f.state = State::runnable;
    f.idx = uint3{t % bx, (t / bx) % by, t / (bx * by)};
    f.sp = fresh_stack(t);
  }
  // Every other block runs its threads last to first (the first block of every other launch too):
  // a race that one order hides (a thread reading what another writes without a barrier between)
  // the other shows.
  const unsigned block = (g_block_idx.z * g_grid_dim.y + g_block_idx.y) * g_grid_dim.x + g_block_idx.x;
  const bool reverse = (block + g_launch_parity) % 2 == 1;
  unsigned live = threads;
  while (live > 0) {
    for (unsigned k = 0; k < threads; ++k) {
      const unsigned t = reverse ? threads - 1 - k : k;
      Fiber& f = g_run.fibers[t];
      if (f.state != State::runnable) continue;
      g_run.current = int(t);
      g_thread_idx = f.idx;
      switch_to_fiber(f, t);
      if (f.state == State::done) --live;
    }
    g_run.current = -1;
    if (live == 0) break;
    // Every live thread now waits. Open each warp whose live lanes all wait at __syncwarp or a
    // warp collective, else the block barrier if every live thread waits there.
    bool opened = false;
    unsigned at_block = 0;
    for (unsigned w = 0; w * 32 < threads; ++w) {
      const unsigned end = std::min(threads, (w + 1) * 32);
      unsigned waiting = 0, alive = 0;
      for (unsigned t = w * 32; t < end; ++t) {
        const State s = g_run.fibers[t].state;
        alive += s != State::done;
        waiting += s == State::at_warp_barrier;
        at_block += s == State::at_block_barrier;
      }
      if (alive > 0 && waiting == alive) {
        for (unsigned t = w * 32; t < end; ++t)
          if (g_run.fibers[t].state == State::at_warp_barrier) g_run.fibers[t].state = State::runnable;
        opened = true;
      }
    }
    if (!opened && at_block == live) {
      for (Fiber& f : g_run.fibers)
        if (f.state == State::at_block_barrier) f.state = State::runnable;
      opened = true;
    }
    if (!opened) {
      char msg[200];
      std::snprintf(msg, sizeof msg,
                    "deadlock in block (%u,%u,%u): %u live threads, %u at __syncthreads, the rest at warp barriers",
                    g_block_idx.x, g_block_idx.y, g_block_idx.z, live, at_block);
      die(msg);
    }
  }
}

}  // namespace

void run_grid(dim3 grid, dim3 block, size_t shared_bytes, void (*thread_body)(void*), void* ctx) {
  std::lock_guard<std::recursive_mutex> lock(g_launch_mutex);
  if (g_run.current >= 0) die("a kernel launched from inside a kernel");
  note_queued_work();
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  const unsigned long long blocks = 1ull * grid.x * grid.y * grid.z;
  if (threads == 0 || threads > kMaxThreads || block.z > 64 || blocks == 0 || grid.y > 65535 || grid.z > 65535 ||
      grid.x > 0x7fffffffu) {
    set_last_error(cudaErrorInvalidConfiguration);
    return;
  }
  if (shared_bytes > max_dynamic_shared_bytes()) {
    set_last_error(cudaErrorInvalidValue);
    return;
  }
  if (!g_stacks) {
    void* p = mmap(nullptr, kStackBytes * kMaxThreads, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) die("cannot map the fibers' stacks");
    g_stacks = static_cast<char*>(p);
  }
  // Uninitialised on a GPU: filled with a pattern here so a kernel reading shared memory it never
  // wrote gets garbage, not zeros that happen to be right.
  g_dynamic_shared.assign(shared_bytes + 16, 0xA5);
  g_run.slots.assign(threads, 0);
  g_run.body = thread_body;
  g_run.ctx = ctx;
  g_grid_dim = grid;
  g_block_dim = block;
  g_launch_parity ^= 1u;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        g_block_idx = uint3{x, y, z};
        run_block(unsigned(threads));
      }
}

void* dynamic_shared() {
  if (g_run.current < 0) die("dynamic shared memory outside a kernel");
  return g_dynamic_shared.data();
}

void sync_block() {
  if (g_block_dim.x * g_block_dim.y * g_block_dim.z == 1) return;
  wait_at(State::at_block_barrier);
}

void sync_warp() {
  if (g_block_dim.x * g_block_dim.y * g_block_dim.z == 1) return;
  wait_at(State::at_warp_barrier);
}

int lane() { return current_fiber_index() % 32; }

uint64_t warp_exchange(uint64_t bits, int src) {
  const int me = current_fiber_index();
  const int threads = int(g_run.slots.size());
  if (threads == 1) return bits;
  g_run.slots[size_t(me)] = bits;
  sync_warp();  // every live lane has offered its value
  const int from = (me / 32) * 32 + src;
  const uint64_t got = (src < 0 || src >= 32 || from >= threads) ? bits : g_run.slots[size_t(from)];
  sync_warp();  // every lane has read before any offers again
  return got;
}

unsigned warp_ballot(bool pred) {
  const int me = current_fiber_index();
  const int threads = int(g_run.slots.size());
  if (threads == 1) return pred ? 1u : 0u;
  g_run.slots[size_t(me)] = pred ? 1 : 0;
  sync_warp();
  unsigned out = 0;
  const int first = (me / 32) * 32;
  for (int l = 0; l < 32 && first + l < threads; ++l)
    if (g_run.fibers[size_t(first + l)].state != State::done && g_run.slots[size_t(first + l)]) out |= 1u << l;
  sync_warp();
  return out;
}

}  // namespace mlpd_emulate
