#include "train/stop_signal.h"

#include <atomic>
#include <csignal>

namespace mlpd {

namespace {
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_stop_signal(int) { g_stop.store(true, std::memory_order_relaxed); }
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = &on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_signal_received() { return g_stop.load(std::memory_order_relaxed); }

void request_stop_for_test() { g_stop.store(true, std::memory_order_relaxed); }

}  // namespace mlpd
