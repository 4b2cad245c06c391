#include "cli/rank_launcher.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"

extern char** environ;

namespace mlpd::cli {

namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace

std::vector<std::string> launcher_words(const std::string& tmpl, int ranks, int cores) {
  const std::string n = std::to_string(ranks);
  if (tmpl.empty()) {
    // As slurm/lib.sh: Debian's Open MPI needs PMIx under srun; one failed rank ends the step.
    if (std::getenv("SLURM_JOB_ID") && on_path("srun")) return {"srun", "--mpi=pmix", "-n", n, "--kill-on-bad-exit=1"};
    std::vector<std::string> w = {"mpirun", "--mca", "btl", "self,vader"};
    if (::geteuid() == 0) w.push_back("--allow-run-as-root");
    if (ranks > cores) w.push_back("--oversubscribe");
    w.insert(w.end(), {"-np", n});
    return w;
  }
  if (tmpl.find("{n}") == std::string::npos)
    throw UserError("--launcher '" + tmpl + "' has no {n} for the rank count (e.g. \"mpirun -np {n}\")", 2);
  std::vector<std::string> words;
  std::stringstream ss(tmpl);
  std::string word;
  while (ss >> word) {
    for (size_t at; (at = word.find("{n}")) != std::string::npos;) word.replace(at, 3, n);
    words.push_back(word);
  }
  return words;
}

std::string describe_launcher(const std::string& tmpl, int cores) {
  if (!tmpl.empty()) return tmpl;
  std::vector<std::string> words = launcher_words("", 1, cores);
  for (size_t i = 1; i < words.size(); ++i)
    if (words[i] == "1" && (words[i - 1] == "-np" || words[i - 1] == "-n")) words[i] = "{n}";
  std::string s = join_words(words);
  if (words[0] == "mpirun") s += " (with --oversubscribe above " + std::to_string(cores) + " ranks)";
  return s;
}

int run_logged(const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw UserError("cannot start '" + argv[0] + "': " + std::strerror(rc), 2);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string tail_of_file(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& l : last) out += "  | " + l + "\n";
  return out;
}

std::string own_executable(const char* argv0) {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

bool started_by_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

}  // namespace mlpd::cli
