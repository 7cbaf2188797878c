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

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FileError("failed to read file '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
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
  write_atomic_with(path, [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw FileError("failed to write file '" + path + "': " + std::strerror(errno));
    for (std::string_view piece : pieces) f.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    f.flush();
    if (!f) throw FileError("failed to write file '" + path + "': write error (disk full?)");
  }, d);
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
