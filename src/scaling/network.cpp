#include "scaling/network.h"

#include <cmath>
#include <cstdio>

#include "core/check.h"

namespace mlpd::scaling {

namespace {

// α: NCCL's own alpha-beta tuner (src/graph/tuning.cc, table hwLat, Ring/Simple protocol, the
// per-step latency it adds for each hop): 6.6 µs for a network hop, 5.7 µs for an NVLink hop (NCCL
// 2.5-2.7 era; NCCL 2.4 had 9.6 and 3.4). The per-collective base latency (8.4 µs) is left out: it
// is paid once per call, small next to 2(p-1) hops at scale.
constexpr double kNcclNetStepUs = 6.6;
constexpr double kNcclNvlinkStepUs = 5.7;
// Efficiencies: assumed, not measured. InfiniBand: 0.9 of the line rate (nccl-tests all_reduce
// busbw on a healthy fabric is usually quoted at 85-95% of the NIC rate). NVLink: 0.8 of the
// unidirectional rate.
constexpr double kIbEfficiency = 0.9;
constexpr double kNvlinkEfficiency = 0.8;

const char* kNcclAlpha = "alpha: NCCL src/graph/tuning.cc hwLat (Ring/Simple per-step latency)";

}  // namespace

const std::vector<LinkPreset>& inter_presets() {
  static const std::vector<LinkPreset> p = {
      {"100g", kNcclNetStepUs, 100, kIbEfficiency,
       std::string("InfiniBand EDR / HDR100, 100 Gb/s per NIC (IBTA line rate), one NIC per GPU; efficiency 0.9 "
                   "assumed; ") +
           kNcclAlpha},
      {"200g", kNcclNetStepUs, 200, kIbEfficiency,
       std::string("InfiniBand HDR, 200 Gb/s per NIC (IBTA line rate; DGX A100: 8 ConnectX-6 HDR, one per GPU); "
                   "efficiency 0.9 assumed; ") +
           kNcclAlpha},
      {"400g", kNcclNetStepUs, 400, kIbEfficiency,
       std::string("InfiniBand NDR, 400 Gb/s per NIC (IBTA line rate; DGX H100: 8 ConnectX-7 NDR, one per GPU); "
                   "efficiency 0.9 assumed; ") +
           kNcclAlpha},
  };
  return p;
}

const std::vector<LinkPreset>& intra_presets() {
  static const std::vector<LinkPreset> p = {
      {"nvlink3", kNcclNvlinkStepUs, 300 * 8, kNvlinkEfficiency,
       std::string("A100 NVLink 3: 600 GB/s per GPU both directions = 300 GB/s each way (NVIDIA A100 datasheet); "
                   "efficiency 0.8 assumed; ") +
           kNcclAlpha},
      {"nvlink4", kNcclNvlinkStepUs, 450 * 8, kNvlinkEfficiency,
       std::string("H100 SXM NVLink 4: 900 GB/s per GPU both directions = 450 GB/s each way (NVIDIA H100 "
                   "datasheet); efficiency 0.8 assumed; ") +
           kNcclAlpha},
  };
  return p;
}

std::string preset_names_text(const std::vector<LinkPreset>& presets) {
  std::string s;
  for (const LinkPreset& p : presets) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

namespace {
const LinkPreset& find_in(const std::vector<LinkPreset>& presets, const std::string& name, const char* what) {
  for (const LinkPreset& p : presets)
    if (p.name == name) return p;
  throw UserError(std::string("unknown ") + what + " '" + name + "' (known: " + preset_names_text(presets) + ")", 2);
}
}  // namespace

const LinkPreset& find_inter_preset(const std::string& name) { return find_in(inter_presets(), name, "network"); }
const LinkPreset& find_intra_preset(const std::string& name) {
  return find_in(intra_presets(), name, "intra-node link");
}

std::string describe_link(const Link& l) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "alpha %.2f us, %.1f GB/s", l.alpha_s * 1e6, link_gbytes_per_s(l));
  return buf;
}

Network make_network(const LinkPreset& inter, const LinkPreset& intra, int ranks_per_node) {
  Network n;
  n.name = inter.name + " + " + intra.name;
  n.inter = link_from_gbps(inter.alpha_us, inter.gbits_per_s, inter.efficiency);
  n.intra = link_from_gbps(intra.alpha_us, intra.gbits_per_s, intra.efficiency);
  n.ranks_per_node = ranks_per_node;
  n.source = "inter " + inter.name + " (" + describe_link(n.inter) + "): " + inter.source + "\nintra " + intra.name +
             " (" + describe_link(n.intra) + "): " + intra.source;
  return n;
}

Network measured_network(const Link& link, int ranks_per_node, const std::string& source) {
  Network n;
  n.name = "host";
  n.intra = n.inter = link;
  n.ranks_per_node = ranks_per_node;
  n.source = "intra = inter (" + describe_link(link) + "): " + source;
  return n;
}

Network measured_network(const Link& intra, const Link& inter, int ranks_per_node, const std::string& source) {
  Network n;
  n.name = "host";
  n.intra = intra;
  n.inter = inter;
  n.ranks_per_node = ranks_per_node;
  n.source = "intra " + describe_link(intra) + ", inter " + describe_link(inter) + ": " + source;
  return n;
}

}  // namespace mlpd::scaling
