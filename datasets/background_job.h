// One background thread that runs one job at a time while the caller does other work: what a
// double-buffered input pipeline needs (fill the next batch while the step trains on this one).
//
//   BackgroundJob job;
//   job.submit([&] { fill(slot[1]); });  // starts the thread on first use
//   train(slot[0]);
//   job.wait();                          // slot[1] is ready (or its fill's exception is rethrown)
//
// At most one job is outstanding: submit() and wait() alternate. The thread sets flush-to-zero and
// denormals-are-zero as every computing thread does (core/fpu.h), so a job computes the bits the
// caller's thread would.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace mlpd {

class BackgroundJob {
 public:
  BackgroundJob() = default;
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  // Starts `job` on the thread. Throws if a job is outstanding (call wait first).
  void submit(std::function<void()> job);
  // Blocks until the outstanding job has run; rethrows its exception. Throws if none is outstanding.
  void wait();
  bool pending() const { return pending_; }
  // Waits for an outstanding job (dropping its error) and joins the thread; the destructor does it.
  void stop();

 private:
  void run();

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool pending_ = false;  // submitted, not yet returned by wait()
  bool queued_ = false;   // the thread has a job to pick up
  bool done_ = false;     // the pending job has run
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace mlpd
