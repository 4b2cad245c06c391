#include "core/read_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace mlpd {

std::string read_whole_file(const std::string& path, const std::string& what, int exit_code) {
  std::string where = what;
  where += ' ';
  where += path;
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  // An ifstream opens a directory on Linux and then fails at the first read.
  if (!in || std::filesystem::is_directory(path, ec)) throw UserError(where + ": cannot be opened", exit_code);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw UserError(where + ": read error", exit_code);
  return std::move(text).str();
}

}  // namespace mlpd
