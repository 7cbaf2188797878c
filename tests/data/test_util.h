// Helpers for the data tests: fixture paths, the expected values tools/make_data_fixtures.py
// records, a scratch directory per test, and capturing an error message.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace nnfleet::testing {

inline std::string fixture(const std::string& name) {
  return std::string(NNFLEET_SOURCE_DIR) + "/tests/data/fixtures/" + name;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

// Calls f(n) with `path` holding the first n bytes of `bytes`, for n = size-1 down to 0
// (one write, then shrinking in place: cheap even for a few hundred prefixes).
inline void for_each_truncation(const std::string& path, const std::string& bytes,
                                const std::function<void(size_t)>& f) {
  write_bytes(path, bytes);
  for (size_t n = bytes.size(); n-- > 0;) {
    std::filesystem::resize_file(path, n);
    f(n);
  }
}

// A file holding `bytes` whose single bytes can be overwritten in place (pwrite on one open
// descriptor), for corruption sweeps without rewriting the file each time.
class PatchableFile {
 public:
  PatchableFile(const std::string& path, const std::string& bytes) : bytes_(bytes) {
    write_bytes(path, bytes);
    fd_ = ::open(path.c_str(), O_WRONLY);
    EXPECT_GE(fd_, 0) << "cannot open " << path;
  }
  ~PatchableFile() { ::close(fd_); }
  PatchableFile(const PatchableFile&) = delete;
  PatchableFile& operator=(const PatchableFile&) = delete;
  void set(size_t i, char c) { ASSERT_EQ(::pwrite(fd_, &c, 1, static_cast<off_t>(i)), 1); }
  void restore(size_t i) { set(i, bytes_[i]); }

 private:
  std::string bytes_;
  int fd_ = -1;
};

// A fresh directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("nnfleet_data_test_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// The message of the DataError `f` throws, or "" (with a test failure) if it throws none.
inline std::string data_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

// One line of fixtures/expected.txt.
struct ExpectedArray {
  std::string file, key, dtype;
  Shape shape;
  std::vector<double> values;
};

inline std::vector<ExpectedArray> expected_arrays() {
  std::ifstream f(fixture("expected.txt"));
  EXPECT_TRUE(f.good()) << "missing fixtures/expected.txt; run tools/make_data_fixtures.py";
  std::vector<ExpectedArray> out;
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    ExpectedArray e;
    std::string shape;
    ss >> e.file >> e.key >> e.dtype >> shape;
    if (shape != "scalar") {
      std::istringstream dims(shape);
      for (std::string d; std::getline(dims, d, ',');) e.shape.push_back(std::stoll(d));
    }
    for (std::string v; ss >> v;) e.values.push_back(std::stod(v));
    out.push_back(e);
  }
  return out;
}

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline void expect_matches(const Array& a, const ExpectedArray& e) {
  SCOPED_TRACE(e.file + (e.key == "-" ? "" : ":" + e.key));
  EXPECT_EQ(dtype_name(a.dtype()), e.dtype);
  EXPECT_EQ(a.shape(), e.shape) << "got " << a.shape().str() << ", expected " << e.shape.str();
  ASSERT_EQ(a.shape().size(), static_cast<int64_t>(e.values.size()));
  for (size_t i = 0; i < e.values.size(); ++i)
    EXPECT_EQ(a.at(static_cast<int64_t>(i)), e.values[i]) << "at flat index " << i;
}

}  // namespace nnfleet::testing
