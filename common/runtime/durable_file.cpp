#include "common/runtime/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace imhash {

namespace {

std::string errno_text() { return std::strerror(errno); }

bool write_all(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string temporary_of(const std::string& path) { return path + ".tmp"; }

}  // namespace

std::string make_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create the directory " + dir + ": " + ec.message();
  return {};
}

std::string replace_file_durably(const std::string& dir, const std::string& name,
                                 const std::string& text) {
  const std::string path = dir + "/" + name;
  const std::string tmp = temporary_of(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot write " + tmp + ": " + errno_text();
  const bool ok = write_all(fd, text) && ::fsync(fd) == 0;
  const std::string why = ok ? "" : errno_text();
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return "cannot write " + tmp + ": " + why;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    return "cannot replace " + path + ": " + err;
  }
  // The rename is durable only once the directory entry is on disk.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

void remove_interrupted_write(const std::string& dir, const std::string& name) {
  std::error_code ec;
  std::filesystem::remove(temporary_of(dir + "/" + name), ec);
}

}  // namespace imhash
