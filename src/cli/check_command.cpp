#include <cstdio>

#include "cli/commands.h"
#include "mlperf/check.h"

namespace mlpd::cli {

void add_check_command(CLI::App& app, CheckArgs& a) {
  auto* c = app.add_subcommand(
      "check", "Check result logs against MLPerf's rules (0.7.0 common and per-benchmark rules, our mini targets)");
  c->add_option("files", a.files, "result_N.txt files to check")->required()->check(CLI::ExistingFile);
}

int run_check_command(const CheckArgs& a) {
  int bad = 0;
  for (const std::string& f : a.files) {
    CheckReport rep = check_result_file(f);
    for (const std::string& w : rep.warnings) std::printf("%s: warning: %s\n", f.c_str(), w.c_str());
    for (const std::string& e : rep.errors) std::printf("%s: error: %s\n", f.c_str(), e.c_str());
    std::printf("%s\n", rep.summary.c_str());  // names the file and says PASSED or FAILED
    if (!rep.ok) ++bad;
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace mlpd::cli
