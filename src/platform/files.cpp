// Whole-file reads and atomic writes.
#include "platform/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nnfleet/error.h"

namespace nnfleet {
namespace {

std::string temp_name(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

int open_regular_file(const std::string& path, std::string& why, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    why = std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    why = "is a directory; expected a regular file";
  } else if (!S_ISREG(st.st_mode)) {
    why = std::string("is a ") +
          (S_ISFIFO(st.st_mode)   ? "FIFO (named pipe)"
           : S_ISSOCK(st.st_mode) ? "socket"
                                  : "device") +
          "; expected a regular file";
  } else if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    why = std::strerror(errno);
  } else {
    if (size) *size = static_cast<uint64_t>(st.st_size);
    return fd;
  }
  ::close(fd);
  return -1;
}

bool read_regular_file(const std::string& path, std::string& out, std::string& why) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, why, &size);
  if (fd < 0) return false;
  out.assign(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      why = std::string("read failed: ") + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (r == 0) break;  // the file shrank while we read it
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  out.resize(got);
  return true;
}

std::string read_file(const std::string& path) {
  std::string out, why;
  if (!read_regular_file(path, out, why))
    throw FileError("failed to read file '" + path + "': " + why);
  return out;
}

void write_atomic_with(const std::string& path,
                       const std::function<void(const std::string&)>& writer, Durability d) {
  const std::string tmp = temp_name(path);
  try {
    writer(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (d == Durability::kSystemCrash) fsync_path(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    throw FileError("failed to write file '" + path + "': rename failed: " + std::strerror(e));
  }
  if (d == Durability::kSystemCrash) {
    auto parent = std::filesystem::path(path).parent_path();
    fsync_path(parent.empty() ? "." : parent.string());
  }
}

void write_file_atomic(const std::string& path, std::string_view content, Durability d) {
  write_file_atomic(path, std::span<const std::string_view>(&content, 1), d);
}

void write_file_atomic(const std::string& path, std::span<const std::string_view> pieces,
                       Durability d) {
  write_atomic_with(
      path,
      [&](const std::string& tmp) {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) throw FileError("failed to write file '" + path + "': " + std::strerror(errno));
        for (std::string_view piece : pieces)
          f.write(piece.data(), static_cast<std::streamsize>(piece.size()));
        f.flush();
        if (!f) throw FileError("failed to write file '" + path + "': write error (disk full?)");
      },
      d);
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw FileError("failed to create directory '" + path + "': " + ec.message());
}

}  // namespace nnfleet
