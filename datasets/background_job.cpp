#include "datasets/background_job.h"

#include <utility>

#include "core/check.h"
#include "core/fpu.h"

namespace mlpd {

BackgroundJob::~BackgroundJob() { stop(); }

void BackgroundJob::submit(std::function<void()> job) {
  MLPD_CHECK(job != nullptr, "BackgroundJob::submit: no job");
  {
    std::lock_guard<std::mutex> lock(mu_);
    MLPD_CHECK(!pending_, "BackgroundJob::submit while another job is outstanding (call wait first)");
    job_ = std::move(job);
    pending_ = queued_ = true;
    done_ = false;
    error_ = nullptr;
  }
  if (!thread_.joinable()) {
    stopping_ = false;
    thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();
}

void BackgroundJob::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  MLPD_CHECK(pending_, "BackgroundJob::wait without a job");
  cv_.wait(lock, [this] { return done_; });
  pending_ = done_ = false;
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void BackgroundJob::stop() {
  if (!thread_.joinable()) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !queued_; });  // a job picked up runs to its end first
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  pending_ = queued_ = done_ = false;
  error_ = nullptr;
}

void BackgroundJob::run() {
  enable_flush_denormals();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || queued_; });
    if (stopping_ && !queued_) return;
    queued_ = false;
    std::function<void()> job = std::move(job_);
    cv_.notify_all();
    lock.unlock();
    std::exception_ptr err;
    try {
      job();
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    error_ = err;
    done_ = true;
    cv_.notify_all();
  }
}

}  // namespace mlpd
