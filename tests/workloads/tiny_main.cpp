// mlperf-dist with the tiny test workload registered: the same program, one more list entry.
#include "cli/commands.h"
#include "tests/workloads/tiny/tiny.h"

int main(int argc, char** argv) {
  mlpd::register_workload(mlpd::tiny_entry());
  return mlpd::cli::main_entry(argc, argv);
}
