// Error handling shared by every module: a failed call becomes an exception that names the
// file, line and the library's own message; main() turns it into one line and a non-zero exit.
#pragma once
#include <stdexcept>
#include <string>

namespace mlpd {

// A user-facing error (bad config, missing data): printed as is, exit code `exit_code`.
struct UserError : std::runtime_error {
  int exit_code;
  explicit UserError(const std::string& what, int code = 1) : std::runtime_error(what), exit_code(code) {}
};

// A violated MLPerf rule: exit code 2, the message names the rule and the offending value.
struct RuleError : UserError {
  explicit RuleError(const std::string& what) : UserError(what, 2) {}
};

[[noreturn]] void fail_at(const char* file, int line, const std::string& msg);

}  // namespace mlpd

#define MLPD_CHECK(cond, msg)                                              \
  do {                                                                     \
    if (!(cond)) ::mlpd::fail_at(__FILE__, __LINE__, std::string(msg));    \
  } while (0)
