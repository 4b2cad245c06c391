// The whole of a file, for the many places that parse one (configs, JSON, CSV, checkpoints):
// one way to open it, check the read, and say which file failed.
#pragma once
#include <string>

namespace mlpd {

// The file's bytes. A UserError with `exit_code` names it as "<what> <path>: cannot be opened"
// (missing, unreadable, a directory) or "...: read error" (an I/O error part way).
std::string read_whole_file(const std::string& path, const std::string& what, int exit_code = 2);

}  // namespace mlpd
