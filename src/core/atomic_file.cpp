#include "core/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/check.h"

namespace mlpd {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  namespace fs = std::filesystem;
  const fs::path p(path_);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec) throw UserError("cannot create the directory of " + path_ + ": " + ec.message());
  // A unique temporary beside the target, so the rename stays within one file system.
  std::string tmpl = p.has_parent_path() ? p.parent_path().string() + "/" : std::string();
  tmpl.append(".").append(p.filename().string()).append(".XXXXXX.tmp");
  const int fd = ::mkstemps(tmpl.data(), 4);
  if (fd < 0) throw UserError("cannot create " + tmpl + ": " + std::strerror(errno));
  ::fchmod(fd, 0644);
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw UserError("cannot open " + tmpl + ": " + std::strerror(errno));
  }
  tmp_ = tmpl;
}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::abandon() noexcept {
  if (!file_) return;
  std::fclose(file_);
  file_ = nullptr;
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* bytes, size_t n) {
  MLPD_CHECK(file_, "write to a closed AtomicFile");
  if (n && std::fwrite(bytes, 1, n, file_) != n) {
    const std::string why = std::strerror(errno);
    abandon();
    throw UserError("cannot write " + path_ + ": " + why);
  }
}

void AtomicFile::commit() {
  MLPD_CHECK(file_, "commit of a closed AtomicFile");
  std::FILE* f = file_;
  file_ = nullptr;
  bool ok = std::fflush(f) == 0;
  ok = ::fsync(::fileno(f)) == 0 && ok;
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp_.c_str());
    throw UserError("cannot write " + path_ + ": " + std::strerror(err));
  }
}

void write_file_atomically(const std::string& path, const void* bytes, size_t n) {
  AtomicFile f(path);
  f.write(bytes, n);
  f.commit();
}

}  // namespace mlpd
