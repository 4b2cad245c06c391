#include "train/system_description.h"

#include <mpi.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "comm/collectives.h"
#include "core/atomic_file.h"
#include "core/check.h"

namespace mlpd {

namespace {

// The value after "<field>\t: " in /proc/cpuinfo or "<field>: " in /proc/meminfo, "" when absent.
std::string proc_field(const char* file, const std::string& field) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

std::string os_release() {
  std::string name;
  std::ifstream in("/etc/os-release");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("PRETTY_NAME=", 0) == 0) name = line.substr(12);
  if (name.size() >= 2 && name.front() == '"') name = name.substr(1, name.size() - 2);
  utsname u{};
  if (uname(&u) == 0) name += std::string(name.empty() ? "" : ", ") + u.sysname + " " + u.release;
  return name;
}

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<size_t>(len));
  const size_t cut = s.find_first_of(",\n");
  return s.substr(0, cut);
}

std::string memory_text() {
  std::istringstream kb(proc_field("/proc/meminfo", "MemTotal"));
  double v = 0;
  kb >> v;
  std::ostringstream out;
  out.precision(3);
  out << v / (1024.0 * 1024.0) << " GiB";
  return out.str();
}

}  // namespace

nlohmann::json describe_system(const World& w, const std::string& system, Device device) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const int gpus = device == Device::cuda ? cuda_device_count() : 0;
  const int ranks_per_node = static_cast<int>(allreduce_max(w, w.local_size));
  const std::string unknown = "unknown (not visible to mlperf-dist: edit this file)";
  const std::string processor = proc_field("/proc/cpuinfo", "model name");
  return {
      {"submitter", "mlperf-dist"},
      {"division", "closed"},
      {"status", "Research, Development, or Internal (RDI)"},
      {"system_name", system},
      {"number_of_nodes", std::to_string(w.nodes)},
      {"host_processors_per_node", "1"},
      {"host_processor_model_name", processor.empty() ? unknown : processor},
      {"host_processor_core_count", std::to_string(cpus)},
      {"host_processor_vcpu_count", std::to_string(cpus)},
      {"host_processor_frequency", unknown},
      {"host_processor_caches", unknown},
      {"host_processor_interconnect", unknown},
      {"host_memory_capacity", memory_text()},
      {"host_storage_type", unknown},
      {"host_storage_capacity", unknown},
      {"host_networking", w.nodes > 1 ? unknown : "none (one node)"},
      {"host_networking_topology", w.nodes > 1 ? unknown : "none (one node)"},
      {"host_memory_configuration", unknown},
      {"accelerators_per_node", std::to_string(gpus)},
      {"accelerator_model_name", gpus > 0 ? "CUDA GPU (the result logs name it)" : "none (CPU ranks)"},
      {"accelerator_host_interconnect", gpus > 0 ? unknown : "none"},
      {"accelerator_frequency", gpus > 0 ? unknown : "none"},
      {"accelerator_on-chip_memories", gpus > 0 ? unknown : "none"},
      {"accelerator_memory_configuration", gpus > 0 ? unknown : "none"},
      {"accelerator_memory_capacity", gpus > 0 ? unknown : "none"},
      {"accelerator_interconnect", gpus > 0 ? unknown : "none"},
      {"accelerator_interconnect_topology", gpus > 0 ? unknown : "none"},
      {"cooling", unknown},
      {"hw_notes", std::to_string(w.size) + " MPI ranks, " + std::to_string(ranks_per_node) + " per node"},
      {"framework", "mlperf-dist (C++20, OpenBLAS" + std::string(cuda_ops_built() ? ", CUDA, cuBLAS, NCCL" : "") + ")"},
      {"other_software_stack", mpi_library() + ", g++ " + __VERSION__},
      {"operating_system", os_release()},
      {"sw_notes", ""},
  };
}

std::string system_description_path(const std::string& results_dir, const std::string& system) {
  std::filesystem::path root = std::filesystem::path(results_dir).lexically_normal();
  if (root.filename().empty()) root = root.parent_path();  // "results/" -> "results"
  return (root.parent_path() / "systems" / (system + ".json")).string();
}

nlohmann::json load_or_write_system_description(const std::string& path, const nlohmann::json& fresh) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!in.good() && !in.eof()) throw UserError(path + ": cannot read the system description", 2);
    if (!j.is_object()) throw UserError(path + ": not a JSON object (an MLPerf system description)", 2);
    return j;
  }
  const std::string text = fresh.dump(2) + "\n";
  write_file_atomically(path, text.data(), text.size());
  return fresh;
}

}  // namespace mlpd
