// Names a user chooses that become parts of paths, and files the program writes beside its
// results, are checked before a run starts: a --system of "../x" must not put results outside
// --results-dir, and a --loss-log pointed at a result log must not replace it.
#pragma once
#include <string>
#include <vector>

namespace mlpd {

// One path component (--system): letters, digits, '.', '_' and '-', not starting with a dot,
// 1 to 100 characters. UserError (exit 2) naming `what` otherwise.
void check_path_component(const std::string& what, const std::string& name);

// Auxiliary outputs (--loss-log, --dump-params, --trace), as (option, path) pairs, "" for unset:
// none may be named like a result log (result_<N>.txt) or replace an existing file that holds
// MLLOG lines or is a directory, and no two may be the same file. UserError (exit 2).
void check_aux_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace mlpd
