// Data files through the public API (nnfleet/data.h): the engine's loaders (data/) behind
// read_array, and the NumPy writers behind write_npy / write_npz.
#include "nnfleet/data.h"

#include <cctype>
#include <cstdio>
#include <cstring>

#include "api/convert.h"
#include "api/public_array.h"
#include "data/dataset.h"
#include "platform/file.h"
#include "platform/zip_archive.h"

namespace nnfleet::api {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i])
      return false;
  return true;
}

// The first bytes of a data file, to tell NumPy, zip (.npz) and IDX apart. Throws DataError.
size_t read_head(const std::string& path, unsigned char (&head)[6]) {
  std::string why;
  File f = File::open_regular(path, why);
  if (!f.is_open()) throw_data_error(path, why);
  size_t got = 0;
  f.read_full(head, sizeof head, got);  // a failed read leaves what it got: too short to match
  return got;
}

nnfleet::Array read_engine_array(const std::string& spec, const ReadOptions& o,
                                 Array* label_column) {
  const size_t colon = spec.rfind(':');
  if (colon != std::string::npos && ends_with(spec.substr(0, colon), ".npz"))
    return load_npz(spec.substr(0, colon), spec.substr(colon + 1));
  unsigned char head[6] = {};
  const size_t n = read_head(spec, head);
  if (n >= 6 && std::memcmp(head, "\x93NUMPY", 6) == 0) return load_npy(spec);
  if (n >= 4 && head[0] == 'P' && head[1] == 'K') {
    const auto keys = nnfleet::npz_keys(spec);
    if (keys.size() != 1) {
      std::string list;
      for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
      throw UsageError("failed to choose an array of '" + spec + "': it holds " +
                       std::to_string(keys.size()) + " (" + list + "); expected '" + spec +
                       ":KEY'");
    }
    return load_npz(spec, keys[0]);
  }
  if ((n >= 2 && head[0] == 0x1f && head[1] == 0x8b) || (n >= 4 && head[0] == 0 && head[1] == 0))
    return load_idx(spec);
  if (ends_with(spec, ".csv")) {
    if (o.label.empty())
      throw UsageError("failed to read '" + spec + "': a CSV file needs " + o.label_option +
                       "COLUMN (the column that is not an input)");
    CsvData d = load_csv(spec, o.label);
    if (label_column) *label_column = api_detail::to_public(d.y);
    return d.x;
  }
  throw_data_error(spec, "unknown format; expected .npy, .npz[:key], an IDX file or .csv");
}

}  // namespace

Array read_array(const std::string& spec, const ReadOptions& options, Array* label_column) {
  return api_detail::to_public(read_engine_array(spec, options, label_column));
}

Array read_npz(const std::string& path, const std::string& key) {
  return api_detail::to_public(load_npz(path, key));
}

std::vector<std::string> npz_keys(const std::string& path) {
  std::string why;
  if (!File::open_regular(path, why).is_open()) throw_data_error(path, why);
  return nnfleet::npz_keys(path);
}

void write_npy(const std::string& path, const ArrayView& a) {
  save_npy(path, api_detail::to_array(a, "'" + path + "'"));
}

void write_npz(const std::string& path,
               const std::vector<std::pair<std::string, ArrayView>>& arrays) {
  // Each member is written as an .npy file first (save_npy's checks and layout), then stored.
  std::vector<ZipMember> members;
  std::vector<std::string> temps;
  auto remove_temps = [&temps] {
    for (const auto& t : temps) std::remove(t.c_str());
  };
  try {
    for (size_t j = 0; j < arrays.size(); ++j) {
      temps.push_back(path + ".part" + std::to_string(j) + ".npy");
      write_npy(temps.back(), arrays[j].second);
      members.push_back({arrays[j].first + ".npy", "", temps.back()});
    }
    write_zip(path + ".part", members);
  } catch (...) {
    remove_temps();
    throw;
  }
  remove_temps();
  if (std::rename((path + ".part").c_str(), path.c_str()) != 0)
    throw_data_error(path, "cannot rename the finished file into place");
}

std::vector<std::string> fashion_mnist_files(const std::string& split) {
  return nnfleet::fashion_mnist_files(split);
}

}  // namespace nnfleet::api
