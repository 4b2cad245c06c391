// A bounded timeline of what each rank did (Chrome trace JSON, viewable in chrome://tracing or
// Perfetto): steps, each parameter view's backward, each gradient bucket's allreduce, the update.
// Only the first `max_steps` traced steps are kept, so the file stays small.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace mlpd {

struct TraceEvent {
  std::string name;
  std::string category;  // "step", "backward", "comm", "optimizer", ...
  double start_s = 0.0;  // MPI_Wtime() seconds
  double end_s = 0.0;
  int lane = 0;          // Chrome "tid": 0 compute, 1 communication
  size_t bytes = 0;
};

struct Trace {
  std::string path;      // empty: tracing off
  int max_steps = 0;
  int steps_traced = 0;
  double origin_s = 0.0;
  std::vector<TraceEvent> events;
  double mark_s = 0.0;       // end of the last compute span of the current step
  bool first_in_step = true; // the first backward span of a step also covers forward and loss
  bool enabled() const { return !path.empty() && steps_traced < max_steps; }
};

void trace_add(Trace& t, TraceEvent e);
// This rank's events as Chrome trace JSON objects (pid = rank), comma-separated, no brackets.
std::string trace_events_json(const Trace& t, int rank);
// Rank 0 writes the file (via temp + rename) from every rank's part.
void write_trace_file(const std::string& path, const std::vector<std::string>& rank_parts);

}  // namespace mlpd
