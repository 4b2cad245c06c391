// What the harnesses share: a scratch directory of this process for the files the fuzz input is
// written to (the code under test reads paths, not bytes), removed at exit.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace mlpd::fuzz {

inline void remove_scratch_dir();

inline const std::filesystem::path& scratch_dir() {
  // Never destroyed, so the exit hook below still finds it.
  static const std::filesystem::path* dir = [] {
    auto* d = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                        ("mlpd_fuzz." + std::to_string(::getpid())));
    std::filesystem::create_directories(*d);
    std::atexit(remove_scratch_dir);  // normal exit; a crash leaves it behind, beside the crash input
    return d;
  }();
  return *dir;
}

inline void remove_scratch_dir() {
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir(), ec);
}

inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) std::abort();  // the harness, not the code under test: stop loudly
  return path;
}

}  // namespace mlpd::fuzz
