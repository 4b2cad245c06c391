#include "minigo/gtp_client.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace mlpd {

GtpClient::GtpClient(const std::vector<std::string>& argv, double timeout_seconds) : timeout_(timeout_seconds) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error(std::string("gtp: pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  if (rc != 0) {
    close(to_child_);
    close(from_child_);
    pid_ = -1;
    throw std::runtime_error("gtp: cannot start " + argv[0] + ": " + std::strerror(rc) +
                             (argv[0].find("gnugo") != std::string::npos ? " (apt-get install gnugo; launch/install-deps installs it)"
                                                                : ""));
  }
  signal(SIGPIPE, SIG_IGN);  // a dead engine must be an error here, not the end of the process
}

GtpClient::~GtpClient() {
  if (pid_ <= 0) return;
  const char quit[] = "quit\n";
  (void)!write(to_child_, quit, sizeof quit - 1);
  close(to_child_);
  close(from_child_);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    usleep(10000);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::string GtpClient::read_response() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
  for (;;) {
    const size_t end = buffer_.find("\n\n");
    if (end != std::string::npos) {
      std::string r = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      return r;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("gtp: no response within the timeout");
    pollfd pfd{from_child_, POLLIN, 0};
    const int ready = poll(&pfd, 1, int(left.count()));
    if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("gtp: poll: ") + std::strerror(errno));
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = read(from_child_, buf, sizeof buf);
    if (n <= 0) throw std::runtime_error("gtp: the engine closed its output (did it die?)");
    for (ssize_t i = 0; i < n; ++i)
      if (buf[i] != '\r') buffer_ += buf[i];
  }
}

std::string GtpClient::command(const std::string& line) {
  const std::string msg = line + "\n";
  if (write(to_child_, msg.data(), msg.size()) != ssize_t(msg.size()))
    throw std::runtime_error("gtp: cannot write to the engine (did it die?)");
  std::string r = read_response();
  if (r.size() >= 1 && r[0] == '?') throw std::runtime_error("gtp: '" + line + "' failed: " + r.substr(1));
  if (r.empty() || r[0] != '=') throw std::runtime_error("gtp: malformed response to '" + line + "': " + r);
  size_t a = 1;
  while (a < r.size() && (r[a] == ' ' || std::isdigit(static_cast<unsigned char>(r[a])))) ++a;
  while (!r.empty() && (r.back() == ' ' || r.back() == '\n')) r.pop_back();
  return a < r.size() ? r.substr(a) : "";
}

std::vector<std::string> gnugo_command(int level, double komi, int size) {
  char k[32];
  std::snprintf(k, sizeof k, "%g", komi);
  // Debian installs games in /usr/games, which is not on every PATH (not in containers or CI).
  const std::string exe = access("/usr/games/gnugo", X_OK) == 0 ? "/usr/games/gnugo" : "gnugo";
  return {exe, "--mode", "gtp", "--level", std::to_string(level), "--chinese-rules", "--komi", k,
          "--boardsize", std::to_string(size)};
}

}  // namespace mlpd
