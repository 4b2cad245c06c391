// mlperf-dist: the command line. Each subcommand is a thin layer over a library call; errors
// become one clear line and an exit code of the one convention in commands.h.
#include "cli/commands.h"

int main(int argc, char** argv) { return mlpd::cli::main_entry(argc, argv); }
