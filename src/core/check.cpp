#include "core/check.h"

namespace mlpd {

void fail_at(const char* file, int line, const std::string& msg) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + msg);
}

}  // namespace mlpd
