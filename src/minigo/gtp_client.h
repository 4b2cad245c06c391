// A GTP engine as a child process (GNU Go: the referee and the strength yardstick of minigo).
// Owns the child: the destructor asks it to quit, kills it if it does not, and reaps it.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace mlpd {

class GtpClient {
 public:
  // argv[0] is looked up in PATH. std::runtime_error if it cannot be started.
  explicit GtpClient(const std::vector<std::string>& argv, double timeout_seconds = 30.0);
  ~GtpClient();
  GtpClient(const GtpClient&) = delete;
  GtpClient& operator=(const GtpClient&) = delete;
  // The response after "= " (trimmed); std::runtime_error on "? ...", a timeout, or a dead engine.
  std::string command(const std::string& line);

 private:
  std::string read_response();
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  double timeout_ = 30.0;
  std::string buffer_;
};

// `gnugo --mode gtp --level N --chinese-rules --komi K --boardsize S` (Debian's /usr/games/gnugo
// when present, else gnugo from PATH); starting it fails with a clear error when it is not installed.
std::vector<std::string> gnugo_command(int level, double komi, int size);

}  // namespace mlpd
