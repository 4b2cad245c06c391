// A file that appears under its final name complete or not at all: written to a temporary in the
// same directory, every write, flush, fsync and close checked, then renamed. On any failure, or
// when dropped without commit (an exception unwinding), the temporary is removed: a partial file
// is never renamed to its final name and never left behind.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace mlpd {

class AtomicFile {
 public:
  // Creates the parent directories and the temporary; UserError naming the path on failure.
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // abandons an uncommitted file (removes the temporary); never throws

  void write(const void* bytes, size_t n);  // UserError on a short write (full disk, quota)
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Flush, fsync, close, rename to the final name. UserError on failure, the temporary removed.
  void commit();
  const std::string& path() const { return path_; }

 private:
  void abandon() noexcept;
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
};

// The whole file at once.
void write_file_atomically(const std::string& path, const void* bytes, size_t n);

}  // namespace mlpd
