// Starting this program at N ranks from a command that is itself not under MPI (`scale`): the
// launcher that fits where we are (srun inside a Slurm allocation, else mpirun on this host, or
// the user's own template), the child's output kept in a log file.
#pragma once
#include <string>
#include <vector>

namespace mlpd::cli {

// The words that start `ranks` ranks. `tmpl` "" picks the default: `srun --mpi=pmix -n {n}` when
// SLURM_JOB_ID is set and srun exists, else mpirun with this project's one-host flags
// (--mca btl self,vader; --allow-run-as-root as root; --oversubscribe when ranks exceed cores).
// Otherwise `tmpl` is split on spaces and every "{n}" replaced by the rank count (no quoting);
// a template without "{n}" is a UserError (exit 2).
std::vector<std::string> launcher_words(const std::string& tmpl, int ranks, int cores);

// The launcher as a template with {n}, for the user to see.
std::string describe_launcher(const std::string& tmpl, int cores);

// Runs argv with stdout and stderr appended to `log_path`; returns its exit status (128 + signal
// when killed). A command that cannot be started is a UserError naming it.
int run_logged(const std::vector<std::string>& argv, const std::string& log_path);

// The last `lines` lines of a text file ("" when unreadable), to show why a child failed.
std::string tail_of_file(const std::string& path, int lines);

// This program's own path (/proc/self/exe), falling back to argv0.
std::string own_executable(const char* argv0);

// True when this process was started by an MPI launcher (Open MPI, PMI, PMIx).
bool started_by_mpi_launcher();

std::string join_words(const std::vector<std::string>& words);

}  // namespace mlpd::cli
