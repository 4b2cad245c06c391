// A fresh directory for one test under the system's temporary directory, removed with all it
// holds when the test ends; `dir / "name"` is the path of a file in it.
#pragma once
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace mlpd {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("mlpd_datasets_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace mlpd
