// One string from every rank: to rank 0 (trace parts, per-rank reports) or to all (game records).
#pragma once
#include <string>
#include <vector>

#include "comm/world.h"

namespace mlpd {

// Returns every rank's string on rank 0 (index = rank); an empty vector elsewhere.
std::vector<std::string> gather_strings(const World& w, const std::string& mine);
// Every rank's string on every rank (index = rank): records all ranks need (self-play games).
std::vector<std::string> allgather_strings(const World& w, const std::string& mine);

}  // namespace mlpd
