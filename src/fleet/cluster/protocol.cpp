// The cluster protocol's packets and the facts ranks compare before a run (see protocol.h).
#include "fleet/cluster/protocol.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "platform/cpu.h"
#include "tensor/rng.h"

namespace nnfleet::fleet_detail {
namespace {

void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

// Mixes 8 bytes at a time into four independent lanes (fast enough to hash a data set of a few
// hundred MB in well under a second); only used to see that every node loaded the same data.
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) {
  constexpr uint64_t k1 = 0x9E3779B97F4A7C15ull, k2 = 0xC2B2AE3D27D4EB4Full;
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {seed, seed ^ k1, seed ^ k2, seed ^ (k1 * k2)};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lane[k] = ((lane[k] ^ (w * k1)) << 31 | (lane[k] ^ (w * k1)) >> 33) * k2;
    }
  uint64_t h = static_cast<uint64_t>(n);
  for (uint64_t l : lane) h = (h ^ l) * k1;
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

uint64_t hash_array(const Array& a, uint64_t h) {
  h = (h ^ static_cast<uint64_t>(a.dtype())) * 0x100000001b3ull;
  for (int64_t d : a.shape()) h = (h ^ static_cast<uint64_t>(d)) * 0x100000001b3ull;
  return hash_bytes(a.data(), a.size_bytes(), h);
}

}  // namespace

std::string encode(const Packet& p) {
  const std::string head = p.head.dump();
  size_t n = 16 + head.size();
  for (const auto& b : p.blobs) n += 8 + b.size();
  std::string s;
  s.reserve(n);
  put_u64(s, head.size());
  s += head;
  put_u64(s, p.blobs.size());
  for (const auto& b : p.blobs) {
    put_u64(s, b.size());
    s += b;
  }
  return s;
}

Packet decode(const std::string& s) {
  size_t at = 0;
  auto u64 = [&] {
    NNFLEET_CHECK(at + 8 <= s.size());
    uint64_t v;
    std::memcpy(&v, s.data() + at, 8);
    at += 8;
    return v;
  };
  auto bytes = [&](uint64_t n) {
    NNFLEET_CHECK(n <= s.size() - at);
    std::string b = s.substr(at, n);
    at += n;
    return b;
  };
  Packet p;
  p.head = Json::parse(bytes(u64()));
  const uint64_t blobs = u64();
  for (uint64_t i = 0; i < blobs; ++i) p.blobs.push_back(bytes(u64()));
  return p;
}

Json number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }
double number(const Json& j) { return j.is_null() ? NAN : j.get<double>(); }

Json epoch_to_json(const EpochRecord& r) {
  Json values = Json::array();
  for (const auto& [k, v] : r.values) values.push_back(Json::array({k, number(v)}));
  return {{"epoch", r.epoch}, {"seconds", r.seconds}, {"values", values}};
}

EpochRecord epoch_from_json(const Json& j) {
  EpochRecord r;
  r.epoch = j.at("epoch").get<int>();
  r.seconds = j.at("seconds").get<double>();
  for (const auto& kv : j.at("values"))
    r.values.emplace_back(kv[0].get<std::string>(), number(kv[1]));
  return r;
}

double us_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
}

Json RankInfo::to_json() const {
  return {{"rank", rank},           {"host", host},
          {"cores", cores},         {"loaded_data", loaded_data},
          {"plan_hash", plan_hash}, {"data_hash", data_hash}};
}

RankInfo RankInfo::from_json(const Json& j) {
  RankInfo r;
  r.rank = j.at("rank").get<int>();
  r.host = j.at("host").get<std::string>();
  r.cores = j.at("cores").get<std::vector<int>>();
  r.loaded_data = j.at("loaded_data").get<bool>();
  r.plan_hash = j.at("plan_hash").get<uint64_t>();
  r.data_hash = j.at("data_hash").get<uint64_t>();
  return r;
}

uint64_t plan_hash(const Plan& plan) {
  uint64_t h = hash_name(std::to_string(plan.seed));
  for (const auto& m : plan.models) h = (h ^ hash_name(m.expanded)) * 0x100000001b3ull;
  return h;
}

uint64_t data_hash(const std::vector<FleetData>& sources) {
  uint64_t h = hash_name(std::to_string(sources.size()));
  for (const FleetData& d : sources) {
    h = (h ^ hash_name(std::to_string(d.scale) + "/" + std::to_string(d.n_train) + "/" +
                       std::to_string(d.n_val))) *
        0x100000001b3ull;
    h = hash_array(d.train.x, h);
    h = hash_array(d.train.y, h);
    if (d.test) {
      h = hash_array(d.test->x, h);
      h = hash_array(d.test->y, h);
    }
  }
  return h | 1;  // never 0, which means "not computed"
}

void measure_memory(RankSummary& r) {
  r.peak_rss_bytes = peak_rss_bytes();
  std::ifstream f("/proc/self/status");
  std::string key;
  size_t kb = 0;
  while (f >> key) {
    if (key == "RssAnon:" && f >> kb) r.rss_private_bytes = kb * 1024;
    if (key == "RssShmem:" && f >> kb) r.rss_shared_bytes = kb * 1024;
  }
}

}  // namespace nnfleet::fleet_detail
