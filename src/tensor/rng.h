// Rng: a small deterministic random generator (xoshiro256**, seeded through splitmix64).
// Every random stream of a model (initialization, shuffling, dropout) is derived from the plan
// seed, the model's name and a stream tag only, so results never depend on thread scheduling.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace nnfleet {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a, for turning names into seeds (stable across platforms and runs).
inline uint64_t hash_name(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

class Rng {
 public:
  Rng() : Rng(0) {}
  explicit Rng(uint64_t seed) {
    uint64_t s = seed;
    for (auto& w : s_) w = splitmix64(s);
  }
  // The stream `tag` ("init", "shuffle", "dropout", ...) of model `name` under plan seed `seed`.
  Rng(uint64_t seed, std::string_view name, std::string_view tag)
      : Rng(seed ^ (hash_name(name) * 31 + hash_name(tag))) {}

  // The full generator state, for checkpoints.
  std::array<uint64_t, 4> state() const { return {s_[0], s_[1], s_[2], s_[3]}; }
  void set_state(const std::array<uint64_t, 4>& st) {
    for (int i = 0; i < 4; ++i) s_[i] = st[i];
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 24 random bits (exactly representable as float).
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [0, 1) as double with 53 bits.
  double uniform_double() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<__uint128_t>(next()) * n) >> 64);
  }
  // Standard normal (Box-Muller in double).
  double normal() {
    double u1 = uniform_double(), u2 = uniform_double();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace nnfleet
