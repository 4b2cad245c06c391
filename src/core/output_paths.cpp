#include "core/output_paths.h"

#include <filesystem>
#include <fstream>
#include <regex>

#include "core/check.h"

namespace mlpd {

void check_path_component(const std::string& what, const std::string& name) {
  static const std::regex ok("[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}");
  if (!std::regex_match(name, ok))
    throw UserError(what + " '" + name +
                        "' is not a plain name: use 1 to 100 letters, digits, '.', '_' or '-', not starting with a dot",
                    2);
}

namespace {

bool holds_mllog(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  char head[9] = {};
  in.read(head, sizeof head);
  return in.gcount() == sizeof head && std::string(head, sizeof head) == ":::MLLOG ";
}

}  // namespace

void check_aux_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  static const std::regex result_name("\\.?result_.*\\.txt(\\..*)?");
  std::vector<std::pair<std::string, fs::path>> seen;
  for (const auto& [option, path] : outputs) {
    if (path.empty()) continue;
    const fs::path p(path);
    const std::string base = p.filename().string();
    if (base.empty() || base == "." || base == "..") throw UserError(option + " " + path + ": not a file name", 2);
    if (std::regex_match(base, result_name))
      throw UserError(option + " " + path + ": named like a result log; choose another name", 2);
    std::error_code ec;
    if (fs::is_directory(p, ec)) throw UserError(option + " " + path + ": is a directory", 2);
    if (fs::exists(p, ec) && holds_mllog(p))
      throw UserError(option + " " + path + ": holds MLLOG lines (a result log); it is not replaced", 2);
    const fs::path canonical = fs::weakly_canonical(p, ec);
    for (const auto& [other, q] : seen)
      if (q == canonical) throw UserError(option + " and " + other + " name the same file " + path, 2);
    seen.emplace_back(option, canonical);
  }
}

}  // namespace mlpd
