// The system a result was measured on, as MLPerf submissions describe it: systems/<system>.json
// beside the results folder (MLPerf's submission layout: <root>/results/<system>/..., and
// <root>/systems/<system>.json), with every field MLCommons' system_desc_checker requires. What
// this program can see (processor, memory, nodes, accelerators, software versions) is filled in;
// what it cannot (cooling, networking) says so, for the submitter to edit.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "comm/world.h"
#include "kernels/device.h"

namespace mlpd {

// Collective over the world (node and accelerator counts); the same object on every rank.
nlohmann::json describe_system(const World& w, const std::string& system, Device device);

// <dirname(results_dir)>/systems/<system>.json.
std::string system_description_path(const std::string& results_dir, const std::string& system);

// The file's description when it exists (a submitter's edits are kept; a file that is not a JSON
// object is a UserError, exit 2); otherwise `fresh`, written atomically. Rank 0 only.
nlohmann::json load_or_write_system_description(const std::string& path, const nlohmann::json& fresh);

}  // namespace mlpd
