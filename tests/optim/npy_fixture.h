// A minimal .npy reader for the golden fixtures tools/make_optimizer_fixtures.py writes: format
// version 1.x or 2.x, dtype '<f4' or '<f8', C order, any rank. Values are widened to double.
// Test-only; nnfleet's real loader is src/data/npy.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace nnfleet::testing {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

inline NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw std::runtime_error(path + ": not a .npy file");
  const auto u8 = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])); };
  const int major = static_cast<int>(u8(6));
  size_t hlen, hstart;
  if (major == 1) {
    hlen = u8(8) | (u8(9) << 8);
    hstart = 10;
  } else {
    hlen = u8(8) | (u8(9) << 8) | (u8(10) << 16) | (u8(11) << 24);
    hstart = 12;
  }
  const std::string header = bytes.substr(hstart, hlen);
  const size_t data = hstart + hlen;

  size_t width;
  if (header.find("'descr': '<f8'") != std::string::npos) {
    width = 8;
  } else if (header.find("'descr': '<f4'") != std::string::npos) {
    width = 4;
  } else {
    throw std::runtime_error(path + ": expected dtype <f4 or <f8 in " + header);
  }
  if (header.find("'fortran_order': False") == std::string::npos)
    throw std::runtime_error(path + ": expected C order");

  NpyArray a;
  const size_t open = header.find('(', header.find("'shape'"));
  const size_t close = header.find(')', open);
  std::string dims = header.substr(open + 1, close - open - 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    if (comma == std::string::npos) comma = dims.size();
    const std::string d = dims.substr(pos, comma - pos);
    if (d.find_first_of("0123456789") != std::string::npos) a.shape.push_back(std::stoll(d));
    pos = comma + 1;
  }
  int64_t count = 1;
  for (int64_t d : a.shape) count *= d;
  if (bytes.size() != data + static_cast<size_t>(count) * width)
    throw std::runtime_error(path + ": size does not match the shape");
  a.values.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const char* p = bytes.data() + data + static_cast<size_t>(i) * width;
    if (width == 8) {
      std::memcpy(&a.values[i], p, 8);
    } else {
      float v;
      std::memcpy(&v, p, 4);
      a.values[i] = v;
    }
  }
  return a;
}

}  // namespace nnfleet::testing
