// Rank 0 collects one string from every rank (trace parts, per-rank reports).
#pragma once
#include <string>
#include <vector>

#include "comm/world.h"

namespace mlpd {

// Returns every rank's string on rank 0 (index = rank); an empty vector elsewhere.
std::vector<std::string> gather_strings(const World& w, const std::string& mine);

}  // namespace mlpd
