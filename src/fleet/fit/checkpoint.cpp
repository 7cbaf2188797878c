// Checkpoint files: "NNFCKPT1", a JSON header, three float arrays, a CRC-32 (zlib) checksum.
#include "fleet/fit/checkpoint.h"

#include <zlib.h>

#include <array>
#include <cstring>

#include "platform/files.h"

namespace nnfleet {
namespace {

constexpr char kMagic[8] = {'N', 'N', 'F', 'C', 'K', 'P', 'T', '1'};

// CRC-32 of s continued from crc. (zlib treats a null buffer as "return the initial value", so
// an empty piece must not reach it.)
uint64_t checksum(uint64_t crc, std::string_view s) {
  return s.empty() ? crc : crc32_z(crc, reinterpret_cast<const Bytef*>(s.data()), s.size());
}

void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
std::string_view bytes_of(std::span<const float> v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}
std::string u64_bytes(uint64_t v) {
  std::string s;
  put_u64(s, v);
  return s;
}

struct Reader {
  const std::string& s;
  size_t pos;
  const std::string& path;
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError("failed to read checkpoint '" + path + "': " + what +
                    "; delete it to restart this model from scratch");
  }
  uint64_t u64() {
    if (pos + 8 > s.size()) fail("file is truncated");
    uint64_t v;
    std::memcpy(&v, s.data() + pos, 8);
    pos += 8;
    return v;
  }
  std::vector<float> floats() {
    const uint64_t n = u64();
    if (n > (s.size() - pos) / sizeof(float)) fail("file is truncated");
    std::vector<float> v(n);
    if (n) std::memcpy(v.data(), s.data() + pos, n * sizeof(float));  // (no null pointer when 0)
    pos += n * sizeof(float);
    return v;
  }
};

}  // namespace

Json metrics_to_json(const Metrics& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

Metrics metrics_from_json(const Json& j) {
  Metrics m;
  for (auto it = j.begin(); it != j.end(); ++it) m.emplace_back(it.key(), it.value().get<double>());
  return m;
}

void save_checkpoint(const std::string& path, const Checkpoint& c, std::span<const float> params,
                     std::span<const float> opt_state) {
  Json h;
  h["model"] = c.model;
  h["epoch"] = c.epoch;
  h["batch"] = c.batch;
  h["iterations"] = c.iterations;
  h["rng"] = c.rng;
  h["loss_sum"] = c.loss_sum;
  h["metric_sums"] = c.metric_sums;
  h["seen"] = c.seen;
  h["epoch_seconds"] = c.epoch_seconds;
  h["seconds"] = c.seconds;
  h["samples"] = c.samples;
  h["best"] = {{"epoch", c.best.epoch}, {"monitor", c.best.monitor}, {"value", c.best.value}};
  h["wait"] = c.wait;
  h["stopped"] = c.stopped;
  h["has_best_params"] = c.has_best_params;
  h["plateau"] = {{"has_best", c.plateau.has_best},
                  {"best", c.plateau.best},
                  {"wait", c.plateau.wait},
                  {"cooldown_counter", c.plateau.cooldown_counter},
                  {"learning_rate", c.learning_rate}};
  Json hist = Json::array();
  for (const auto& r : c.history)
    hist.push_back({{"epoch", r.epoch}, {"seconds", r.seconds}, {"values", Json::array()}});
  for (size_t i = 0; i < c.history.size(); ++i)
    for (const auto& [k, v] : c.history[i].values) hist[i]["values"].push_back({k, v});
  h["history"] = hist;
  // JSON keeps doubles exactly (shortest round-trip form), so resumed histories are bit-identical.
  const std::string header = h.dump();
  // Written in pieces straight from the network's buffers; each float array has a size prefix.
  std::string head(kMagic, 8);
  put_u64(head, header.size());
  head += header;
  put_u64(head, params.size());
  const std::string opt_size = u64_bytes(opt_state.size()),
                    best_size = u64_bytes(c.best_params.size());
  std::array<std::string_view, 7> pieces = {
      head, bytes_of(params), opt_size, bytes_of(opt_state), best_size, bytes_of(c.best_params)};
  uint64_t crc = crc32_z(0L, Z_NULL, 0);
  for (size_t i = 0; i + 1 < pieces.size(); ++i) crc = checksum(crc, pieces[i]);
  const std::string tail = u64_bytes(crc);  // the checksum of everything before it
  pieces.back() = tail;
  write_file_atomic(path, pieces, Durability::kProcessCrash);
}

bool load_checkpoint(const std::string& path, Checkpoint& c) {
  if (!file_exists(path)) return false;
  const std::string s = read_file(path);
  Reader r{s, 0, path};
  if (s.size() < 16 || std::memcmp(s.data(), kMagic, 8) != 0)
    r.fail("not an nnfleet checkpoint (bad magic)");
  {
    uint64_t stored;
    std::memcpy(&stored, s.data() + s.size() - 8, 8);
    if (checksum(crc32_z(0L, Z_NULL, 0), std::string_view(s.data(), s.size() - 8)) != stored)
      r.fail("checksum mismatch (the file is truncated or corrupt)");
  }
  r.pos = 8;
  const uint64_t hlen = r.u64();
  if (hlen > s.size() - r.pos) r.fail("file is truncated");
  try {
    const Json h = Json::parse(s.substr(r.pos, hlen));
    r.pos += hlen;
    c.model = h.at("model").get<std::string>();
    c.epoch = h.at("epoch").get<int>();
    c.batch = h.at("batch").get<int>();
    c.iterations = h.at("iterations").get<int64_t>();
    c.rng = h.at("rng").get<std::array<uint64_t, 4>>();
    c.loss_sum = h.at("loss_sum").get<double>();
    c.metric_sums = h.at("metric_sums").get<std::vector<double>>();
    c.seen = h.at("seen").get<int64_t>();
    c.epoch_seconds = h.at("epoch_seconds").get<double>();
    c.seconds = h.at("seconds").get<double>();
    c.samples = h.at("samples").get<int64_t>();
    c.best.epoch = h.at("best").at("epoch").get<int>();
    c.best.monitor = h.at("best").at("monitor").get<std::string>();
    c.best.value = h.at("best").at("value").get<double>();
    c.wait = h.at("wait").get<int>();
    c.stopped = h.at("stopped").get<bool>();
    c.has_best_params = h.at("has_best_params").get<bool>();
    if (h.contains("plateau")) {  // absent in checkpoints written before ReduceLROnPlateau
      const Json& p = h.at("plateau");
      c.plateau.has_best = p.at("has_best").get<bool>();
      c.plateau.best = p.at("best").get<double>();
      c.plateau.wait = p.at("wait").get<int>();
      c.plateau.cooldown_counter = p.at("cooldown_counter").get<int>();
      c.learning_rate = p.at("learning_rate").get<double>();
    }
    c.history.clear();
    for (const auto& e : h.at("history")) {
      EpochRecord rec;
      rec.epoch = e.at("epoch").get<int>();
      rec.seconds = e.at("seconds").get<double>();
      for (const auto& kv : e.at("values"))
        rec.values.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<double>());
      c.history.push_back(std::move(rec));
    }
  } catch (const Json::exception& e) {
    r.fail(std::string("bad header: ") + e.what());
  }
  c.params = r.floats();
  c.opt_state = r.floats();
  c.best_params = r.floats();
  return true;
}

}  // namespace nnfleet
