#include "workloads/registry.h"

#include "core/check.h"

namespace mlpd {

// One line per workload: its entry, defined in its own folder.
const WorkloadEntry& resnet_entry();
const WorkloadEntry& ncf_entry();
const WorkloadEntry& transformer_entry();
const WorkloadEntry& gnmt_entry();
const WorkloadEntry& ssd_entry();
const WorkloadEntry& maskrcnn_entry();
const WorkloadEntry& minigo_entry();

namespace {

std::vector<const WorkloadEntry*>& entries() {
  static std::vector<const WorkloadEntry*> list = {
      &resnet_entry(),
      &ncf_entry(),
      &transformer_entry(),
      &gnmt_entry(),
      &ssd_entry(),
      &maskrcnn_entry(),
      &minigo_entry(),
  };
  return list;
}

}  // namespace

const std::vector<const WorkloadEntry*>& workload_entries() { return entries(); }

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (const WorkloadEntry* e : entries()) names.push_back(e->spec.name);
  return names;
}

const BenchmarkSpec* find_benchmark_spec(const std::string& name) {
  for (const WorkloadEntry* e : entries())
    if (e->spec.name == name) return &e->spec;
  return nullptr;
}

const WorkloadEntry& find_workload(const std::string& name) {
  for (const WorkloadEntry* e : entries())
    if (e->spec.name == name) return *e;
  std::string names;
  for (const std::string& n : workload_names()) names += (names.empty() ? "" : ", ") + n;
  throw UserError("unknown benchmark '" + name + "' (available: " + names + ")", 2);
}

void register_workload(const WorkloadEntry& entry) {
  if (find_benchmark_spec(entry.spec.name)) throw UserError("workload '" + entry.spec.name + "' registered twice");
  entries().push_back(&entry);
}

std::string workload_data_path(const std::string& data_dir, const std::string& benchmark, const std::string& scale) {
  return data_dir + "/" + benchmark + "_" + scale + ".h5";
}

}  // namespace mlpd
