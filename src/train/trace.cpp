#include "train/trace.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/check.h"

namespace mlpd {

void trace_add(Trace& t, TraceEvent e) {
  if (t.path.empty()) return;
  t.events.push_back(std::move(e));
}

std::string trace_events_json(const Trace& t, int rank) {
  std::string out;
  for (const TraceEvent& e : t.events) {
    nlohmann::json j = {{"name", e.name},
                        {"cat", e.category},
                        {"ph", "X"},
                        {"ts", (e.start_s - t.origin_s) * 1e6},
                        {"dur", (e.end_s - e.start_s) * 1e6},
                        {"pid", rank},
                        {"tid", e.lane}};
    if (e.bytes) j["args"] = {{"bytes", e.bytes}};
    if (!out.empty()) out += ",\n";
    out += j.dump();
  }
  return out;
}

void write_trace_file(const std::string& path, const std::vector<std::string>& rank_parts) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  for (size_t r = 0; r < rank_parts.size(); ++r) {
    const char* lanes[] = {"compute", "communication"};
    for (int lane = 0; lane < 2; ++lane) {
      nlohmann::json meta = {{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", lane},
                             {"args", {{"name", lanes[lane]}}}};
      out += (first ? "" : ",\n") + meta.dump();
      first = false;
    }
    nlohmann::json pname = {{"name", "process_name"}, {"ph", "M"}, {"pid", r},
                            {"args", {{"name", "rank " + std::to_string(r)}}}};
    out += ",\n" + pname.dump();
    if (!rank_parts[r].empty()) out += ",\n" + rank_parts[r];
  }
  out += "\n]}\n";
  write_file_atomically(path, out.data(), out.size());
}

}  // namespace mlpd
