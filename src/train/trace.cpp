#include "train/trace.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

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
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw UserError("cannot write the trace file " + tmp);
    f << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
    bool first = true;
    for (size_t r = 0; r < rank_parts.size(); ++r) {
      const char* lanes[] = {"compute", "communication"};
      for (int lane = 0; lane < 2; ++lane) {
        nlohmann::json meta = {{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", lane},
                               {"args", {{"name", lanes[lane]}}}};
        f << (first ? "" : ",\n") << meta.dump();
        first = false;
      }
      nlohmann::json pname = {{"name", "process_name"}, {"ph", "M"}, {"pid", r},
                              {"args", {{"name", "rank " + std::to_string(r)}}}};
      f << ",\n" << pname.dump();
      if (!rank_parts[r].empty()) f << ",\n" << rank_parts[r];
    }
    f << "\n]}\n";
    if (!f) throw UserError("write failed: " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace mlpd
