// Hashing, Keras semantics (keras/src/layers/preprocessing/hashing.py): each value goes to one
// of num_bins bins, FarmHash Fingerprint64(text) mod bins without a salt (TF's
// to_hash_bucket_fast) and SipHash-2-4 keyed by the two salt values with one (TF's
// to_hash_bucket_strong; an integer salt s is the key [s, s]). Integers are hashed by their
// decimal text (tf.as_string). With a mask_value (and num_bins > 1) bin 0 is the mask's alone:
// the others hash into bins - 1 and move up by one. output_mode "int" gives the bins; one_hot /
// multi_hot / count give rows of num_bins. On a string model input Hashing is a string layer
// (string_layer.h: bins made when data is bound); on numbers (integer ids carried as floats)
// its numeric form hashes in the float graph, where no gradient flows.
// Known values (Keras's docstring): num_bins=3 over A..E gives 1 0 1 1 2, with salt=133 0 0 2 1 0.
#include <farmhash.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>

#include "layers/kinds.h"
#include "layers/layer_util.h"
#include "layers/string_layer.h"
#include "layers/string_lookup_util.h"

namespace nnfleet {
namespace {

uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

// SipHash-2-4 (Aumasson and Bernstein), as highwayhash::SipHash that TF's StrongKeyedHash calls.
uint64_t siphash24(uint64_t k0, uint64_t k1, const char* p, size_t n) {
  uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
  uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
  auto round = [&] {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  };
  auto absorb = [&](uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t m;
    std::memcpy(&m, p + i, 8);  // little-endian words (x86-64)
    absorb(m);
  }
  uint64_t last = static_cast<uint64_t>(n) << 56;
  for (size_t j = 0; i + j < n; ++j)
    last |= static_cast<uint64_t>(static_cast<unsigned char>(p[i + j])) << (8 * j);
  absorb(last);
  v2 ^= 0xff;
  for (int r = 0; r < 4; ++r) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

// The configuration both forms share.
struct HashingRule {
  int64_t bins = 1;
  std::optional<std::string> mask;  // as text (an integer mask_value as its decimal text)
  Json mask_json;
  std::optional<std::pair<uint64_t, uint64_t>> salt;
  Json salt_json;
  LookupOutput mode = LookupOutput::kInt;

  explicit HashingRule(LayerConfig& c) {
    bins = c.get_int("num_bins");
    if (const Json* m = c.get_raw("mask_value"); m && !m->is_null()) {
      if (m->is_string())
        mask = m->get<std::string>();
      else if (m->is_number_integer())
        mask = std::to_string(m->get<int64_t>());
      else
        c.fail("mask_value", "a string, an integer or null");
      mask_json = *m;
    }
    read_salt(c);
    mode = parse_lookup_output(c, true);
    if (mode == LookupOutput::kTfIdf)
      c.fail("output_mode", "one of int, one_hot, multi_hot, count");
    if (c.get_bool("sparse", false)) c.fail("sparse", "false (nnfleet makes dense rows)");
  }
  void read_salt(LayerConfig& c) {
    const Json* s = c.get_raw("salt");
    if (!s || s->is_null()) return;
    salt_json = *s;
    auto key = [&](const Json& v) {
      if (!v.is_number_integer()) c.fail("salt", "an integer, a list of two integers, or null");
      return static_cast<uint64_t>(v.get<int64_t>());
    };
    if (s->is_array() && s->size() == 2)
      salt = std::make_pair(key((*s)[0]), key((*s)[1]));
    else
      salt = std::make_pair(key(*s), key(*s));
    salt_json =
        Json::array({static_cast<int64_t>(salt->first), static_cast<int64_t>(salt->second)});
  }
  // The bin of the value whose text is `t` (n bytes).
  int64_t bin(const char* t, size_t n) const {
    const bool masked = mask && bins > 1;
    if (masked && mask->size() == n && std::memcmp(mask->data(), t, n) == 0) return 0;
    const auto b = static_cast<uint64_t>(masked ? bins - 1 : bins);
    const uint64_t h =
        salt ? siphash24(salt->first, salt->second, t, n) : util::Fingerprint64(t, n);
    return static_cast<int64_t>(h % b) + (masked ? 1 : 0);
  }
  Shape out_shape(const Shape& in) const {
    if (in.rank() > 1)
      throw ModelError(
          "takes one value or a row of values per sample; expected an input of "
          "shape (None,) or (None, k), got " +
          keras_shape(in));
    if (mode == LookupOutput::kInt) return in.rank() == 0 ? Shape{1} : in;
    if (mode == LookupOutput::kOneHot && in.size() > 1) return Shape{in.size(), bins};
    return Shape{bins};
  }
  // Writes one sample's bins (k values) as out_shape's row; `bin_of(j)` is value j's bin.
  template <class BinOf>
  void write(int64_t k, float* out, BinOf bin_of) const {
    if (mode == LookupOutput::kInt) {
      for (int64_t j = 0; j < k; ++j) out[j] = static_cast<float>(bin_of(j));
      return;
    }
    const bool each = mode == LookupOutput::kOneHot && k > 1;
    std::memset(out, 0, static_cast<size_t>(each ? k * bins : bins) * sizeof(float));
    for (int64_t j = 0; j < k; ++j) {
      float& cell = out[(each ? j * bins : 0) + bin_of(j)];
      cell = mode == LookupOutput::kCount ? cell + 1.0f : 1.0f;
    }
  }
  void write_config(Json& j) const {
    j["num_bins"] = bins;
    j["mask_value"] = mask_json;
    j["salt"] = salt_json;
    j["output_mode"] = lookup_output_name(mode);
    j["sparse"] = false;
  }
};

// Hashing of integers carried as floats (the numeric form).
class HashingNumbers final : public Layer {
 public:
  HashingNumbers(const HashingRule& r, const std::string& name) : Layer(name), rule_(r) {}
  const char* class_name() const override { return "Hashing"; }
  Shape output_shape(const std::vector<Shape>& in) const override { return rule_.out_shape(in[0]); }
  void forward(const LayerArgs& a) const override {
    const int64_t k = a.in_shapes[0].size(), width = rule_.out_shape(a.in_shapes[0]).size();
    for (int64_t i = 0; i < a.n; ++i) {
      const float* x = a.x[0] + i * k;
      rule_.write(k, a.y + i * width, [&](int64_t j) {
        // The value as an int64 (truncated; ids are whole), hashed by its decimal text.
        const float v = std::isfinite(x[j]) ? std::fmax(std::fmin(x[j], 4.6e18f), -4.6e18f) : 0.f;
        char buf[24];
        const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
        return rule_.bin(buf, static_cast<size_t>(r.ptr - buf));
      });
    }
  }
  // Hashing is piecewise constant: no gradient reaches its input.
  void backward(const LayerArgs&) const override {}
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    rule_.write_config(j);
    return j;
  }

 private:
  HashingRule rule_;
};

class Hashing final : public StringLayer {
 public:
  Hashing(LayerConfig& c, const std::string& name) : StringLayer(name), rule_(c) {}
  const char* class_name() const override { return "Hashing"; }
  Shape encoded_shape(const Shape& strings) const override { return rule_.out_shape(strings); }
  void encode(const std::string* strings, int64_t n, int64_t per_sample,
              float* out) const override {
    const int64_t width = rule_.out_shape(per_sample == 1 ? Shape{} : Shape{per_sample}).size();
    for (int64_t i = 0; i < n; ++i) {
      const std::string* s = strings + i * per_sample;
      rule_.write(per_sample, out + i * width,
                  [&](int64_t j) { return rule_.bin(s[j].data(), s[j].size()); });
    }
  }
  int64_t id_bound() const override { return rule_.mode == LookupOutput::kInt ? rule_.bins : 0; }
  std::unique_ptr<Layer> numeric_form() const override {
    return std::make_unique<HashingNumbers>(rule_, name());
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    rule_.write_config(j);
    return j;
  }

 private:
  HashingRule rule_;
};

}  // namespace

std::unique_ptr<Layer> make_hashing(LayerConfig& c, const std::string& name) {
  return std::make_unique<Hashing>(c, name);
}

std::vector<LayerExample> hashing_examples() {
  // The registry's Hashing is the string layer (the identity over its bins in the float graph);
  // its numeric form is checked by tests/layers/lookup_layers_test.cpp.
  return {{{{"num_bins", 3}}, {Shape{1}}},
          {{{"num_bins", 4}, {"output_mode", "multi_hot"}, {"salt", 7}}, {Shape{4}}}};
}

// The bin Hashing with this config gives one text (tests and tools).
int64_t hashing_bin_of(const Json& config, const std::string& text) {
  LayerConfig c(config, ConfigMode::kKeras, "Hashing");
  return HashingRule(c).bin(text.data(), text.size());
}

}  // namespace nnfleet
