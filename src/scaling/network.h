// The networks the model predicts for: an intra-node link, an inter-node link (per rail: one NIC
// per GPU, as in DGX nodes), ranks per node. Presets carry their sources; every figure can be
// overridden from the command line (`plan --alpha-inter-us --gbps-inter --efficiency-inter ...`).
//
// A preset's bandwidth is the line rate (Gb/s, bits, one direction) times an efficiency: the
// fraction of the line rate an allreduce's bus bandwidth reaches (nccl-tests' busbw, which is
// exactly 1/β of the ring formula in cost_model.h). The efficiencies below are ASSUMPTIONS, stated
// as such; measure with nccl-tests (or `mlperf-dist comm-bench`) and pass the figure.
#pragma once
#include <string>
#include <vector>

#include "scaling/cost_model.h"

namespace mlpd::scaling {

struct LinkPreset {
  std::string name;          // "200g", "nvlink3"
  double alpha_us = 0.0;     // per message (step)
  double gbits_per_s = 0.0;  // line rate, one direction
  double efficiency = 1.0;   // busbw / line rate
  std::string source;        // where the figures come from
};

// Inter-node: "100g", "200g", "400g" (InfiniBand EDR/HDR100, HDR, NDR; one NIC per GPU).
const std::vector<LinkPreset>& inter_presets();
// Intra-node: "nvlink3" (A100), "nvlink4" (H100).
const std::vector<LinkPreset>& intra_presets();
// UserError (exit 2) naming the presets when unknown.
const LinkPreset& find_inter_preset(const std::string& name);
const LinkPreset& find_intra_preset(const std::string& name);
std::string preset_names_text(const std::vector<LinkPreset>& presets);  // "100g, 200g, 400g"

struct Network {
  std::string name;  // "200g + nvlink3", "host"
  Link intra;
  Link inter;
  int ranks_per_node = 1;
  std::string source;  // one line per link: figures and where they come from
};

Network make_network(const LinkPreset& inter, const LinkPreset& intra, int ranks_per_node);
// This machine (or a cluster measured with comm-bench): one fitted link for both levels.
Network measured_network(const Link& link, int ranks_per_node, const std::string& source);
// Two measured links: within a node and across nodes (comm-bench samples of each kind).
Network measured_network(const Link& intra, const Link& inter, int ranks_per_node, const std::string& source);

// "alpha 6.60 us, 22.5 GB/s" for a link.
std::string describe_link(const Link& l);

}  // namespace mlpd::scaling
