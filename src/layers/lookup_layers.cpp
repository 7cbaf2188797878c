// StringLookup and IntegerLookup, Keras semantics (keras/src/layers/preprocessing/index_lookup.py):
// ids are laid out as [mask (output_mode "int" with a mask_token only)] [num_oov_indices OOV ids]
// [the vocabulary's terms]. A term not in the vocabulary takes the one OOV id, or with several
// the OOV id FarmHash Fingerprint64(term) mod num_oov_indices (strings; tf.strings.
// to_hash_bucket_fast) or floormod(value, num_oov_indices) (integers). The mask token maps to
// id 0 in "int" mode and is dropped from the bag modes. "one_hot" / "multi_hot" / "count" /
// "tf_idf" make rows of the vocabulary's size (max_tokens with pad_to_max_tokens).
// StringLookup reads a string model input (a string layer, string_layer.h: its ids are made
// when data is bound, adapt learns its vocabulary from the training rows); IntegerLookup reads
// integer ids carried as floats in the float graph (no gradient flows through a lookup), and with
// invert maps ids back to the integers.
#include <farmhash.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "layers/kinds.h"
#include "layers/layer_util.h"
#include "layers/string_layer.h"
#include "layers/string_lookup_util.h"

namespace nnfleet {
namespace {

std::optional<int64_t> integer_text(const std::string& t) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || t.empty()) return std::nullopt;
  return v;
}

// The config, vocabulary and id rules both lookups share.
class IndexLookup {
 public:
  IndexLookup(LayerConfig& c, bool strings) : strings_(strings) {
    max_tokens_ = c.has("max_tokens") ? c.get_int("max_tokens", {}, 2) : 0;
    if (!c.has("max_tokens")) c.ignore("max_tokens");
    num_oov_ = c.get_int("num_oov_indices", 1, 0);
    if (num_oov_ == 0)
      c.fail("num_oov_indices",
             "at least 1 (with 0 Keras stops at the first unknown term, which nnfleet's "
             "loaders cannot report mid-batch)");
    mask_ = token(c, "mask_token", std::nullopt);
    oov_ = *token(c, "oov_token", strings ? std::string("[UNK]") : std::string("-1"));
    mode_ = parse_lookup_output(c, true);
    invert_ = c.get_bool("invert", false);
    if (invert_ && mode_ != LookupOutput::kInt)
      c.fail("invert", "false unless output_mode is \"int\"");
    pad_to_max_tokens_ = c.get_bool("pad_to_max_tokens", false);
    if (pad_to_max_tokens_ && max_tokens_ == 0)
      c.fail("pad_to_max_tokens", "false without max_tokens (Keras's rule)");
    if (c.get_bool("sparse", false)) c.fail("sparse", "false (nnfleet makes dense rows)");
    if (strings) c.get_string("encoding", std::string("utf-8"), {"utf-8"});
    c.ignore("vocabulary_size");  // Keras 3 writes the size it computed; recomputed here
    c.ignore("vocabulary_dtype");
    if (const Json* v = c.get_raw("vocabulary")) vocab_json_ = *v;
    vocab_ = make_vocabulary(c, vocabulary_from_json(c, "vocabulary", vocab_json_), specials(),
                             mask_, max_tokens_);
    if (!strings) index_integers(c);
    if (mask_ && !strings) mask_int_ = integer_text(*mask_);
    if (!strings) oov_int_ = integer_text(oov_);
    read_idf(c);
  }

  LookupOutput mode() const { return mode_; }
  bool invert() const { return invert_; }
  int64_t oov_start() const { return mask_ && mode_ == LookupOutput::kInt ? 1 : 0; }
  int64_t token_start() const { return oov_start() + num_oov_; }
  int64_t vocabulary_size() const {
    return token_start() + static_cast<int64_t>(vocab_.tokens.size());
  }
  int64_t depth() const { return pad_to_max_tokens_ ? max_tokens_ : vocabulary_size(); }
  bool has_vocabulary() const { return !vocab_.tokens.empty(); }

  // The output shape for per-sample input `in` (rank 0 or 1).
  Shape out_shape(const Shape& in) const {
    if (in.rank() > 1)
      throw ModelError(
          "takes one value or a row of values per sample; expected an input of "
          "shape (None,) or (None, k), got " +
          keras_shape(in));
    if (mode_ == LookupOutput::kInt) return in.rank() == 0 ? Shape{1} : in;
    // Without a vocabulary a lookup is adapted on the training rows before it trains (the model
    // is then made again, sized by the vocabulary); until then its rows hold only the OOV ids.
    if (mode_ == LookupOutput::kOneHot && in.size() > 1) return Shape{in.size(), depth()};
    return Shape{depth()};
  }

  // The id of term `t`; -1: dropped (the mask token outside "int" mode).
  int64_t string_id(const std::string& t) const {
    if (mask_ && t == *mask_) return mode_ == LookupOutput::kInt ? 0 : -1;
    const int64_t k = vocab_.find(t);
    if (k >= 0) return token_start() + k;
    if (num_oov_ == 1) return oov_start();
    return oov_start() + static_cast<int64_t>(util::Fingerprint64(t.data(), t.size()) %
                                              static_cast<uint64_t>(num_oov_));
  }
  // The id of integer `v` (`whole`: the float it came from was that integer, else it is OOV).
  int64_t integer_id(int64_t v, bool whole) const {
    if (whole && mask_int_ && v == *mask_int_) return mode_ == LookupOutput::kInt ? 0 : -1;
    const auto it = whole ? int_index_.find(v) : int_index_.end();
    if (it != int_index_.end()) return token_start() + it->second;
    return oov_start() + ((v % num_oov_) + num_oov_) % num_oov_;
  }
  // The integer of id `id` (invert): the mask token at 0 with one, the OOV token for the OOV
  // ids and any id outside the vocabulary.
  float inverted(int64_t id) const {
    if (mask_int_ && id == 0) return static_cast<float>(*mask_int_);
    const int64_t k = id - token_start();
    if (id < 0 || k < 0 || k >= static_cast<int64_t>(int_terms_.size()))
      return static_cast<float>(*oov_int_);
    return static_cast<float>(int_terms_[static_cast<size_t>(k)]);
  }

  // The bag row of one sample (bag_width floats): cleared, then each of its k ids added.
  int64_t bag_width(int64_t k) const {
    return mode_ == LookupOutput::kOneHot && k > 1 ? k * depth() : depth();
  }
  void bag_add(int64_t id, int64_t j, int64_t k, float* out) const {
    const int64_t d = depth();
    if (id < 0 || id >= d) return;  // the mask, or beyond a fixed depth
    float& cell = out[(mode_ == LookupOutput::kOneHot && k > 1 ? j * d : 0) + id];
    cell = mode_ == LookupOutput::kCount || mode_ == LookupOutput::kTfIdf ? cell + 1.0f : 1.0f;
  }
  void bag_scale(float* out) const {
    if (mode_ != LookupOutput::kTfIdf) return;
    for (int64_t j = 0; j < depth(); ++j)
      out[j] *= static_cast<size_t>(j) < idf_.size() ? idf_[static_cast<size_t>(j)] : 0.0f;
  }

  std::vector<std::string> full_vocabulary() const {
    if (vocab_.tokens.empty()) return {};
    std::vector<std::string> v = specials();
    v.insert(v.end(), vocab_.tokens.begin(), vocab_.tokens.end());
    return v;
  }
  // Keras's adapt: the terms by count, most frequent first, the special tokens left out; with
  // tf_idf also the idf weights log(1 + documents / (1 + documents holding the term)).
  Json adapt(const std::string* s, int64_t n, int64_t per_sample) const {
    std::unordered_map<std::string, int64_t> counts, docs;
    for (int64_t i = 0; i < n; ++i) {
      std::unordered_map<std::string, bool> seen;
      for (int64_t j = 0; j < per_sample; ++j) {
        const std::string& t = s[i * per_sample + j];
        ++counts[t];
        if (!seen[t]) ++docs[t], seen[t] = true;
      }
    }
    if (mask_) counts.erase(*mask_);
    counts.erase(oov_);
    const std::vector<std::string> terms =
        adapt_order(counts, max_tokens_ ? max_tokens_ - token_start() : -1);
    Json out = {{"vocabulary", terms}};
    if (mode_ == LookupOutput::kTfIdf) {
      Json w = Json::array();
      for (const std::string& t : terms)
        w.push_back(std::log(1.0 + static_cast<double>(n) / (1.0 + static_cast<double>(docs[t]))));
      out["idf_weights"] = std::move(w);
    }
    return out;
  }

  // IntegerLookup's adapt (integer_lookup_adapt).
  Json adapt_integers(const std::vector<double>& values, int64_t per_sample) const {
    std::map<int64_t, int64_t> counts, docs;
    const int64_t n = per_sample ? static_cast<int64_t>(values.size()) / per_sample : 0;
    for (int64_t i = 0; i < n; ++i) {
      std::set<int64_t> seen;
      for (int64_t j = 0; j < per_sample; ++j) {
        const double v = values[static_cast<size_t>(i * per_sample + j)];
        if (!(std::fabs(v) < 4e18) || v != std::floor(v)) continue;
        ++counts[static_cast<int64_t>(v)];
        if (seen.insert(static_cast<int64_t>(v)).second) ++docs[static_cast<int64_t>(v)];
      }
    }
    if (mask_int_) counts.erase(*mask_int_);
    counts.erase(*oov_int_);
    std::vector<std::pair<int64_t, int64_t>> order(counts.begin(), counts.end());
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first > b.first;
    });
    const int64_t keep = max_tokens_ ? max_tokens_ - token_start() : -1;
    if (keep >= 0 && static_cast<int64_t>(order.size()) > keep)
      order.resize(static_cast<size_t>(keep));
    Json v = Json::array(), w = Json::array();
    for (const auto& [t, c] : order) {
      v.push_back(t);
      w.push_back(std::log(1.0 + static_cast<double>(n) / (1.0 + static_cast<double>(docs[t]))));
    }
    Json out = {{"vocabulary", v}};
    if (mode_ == LookupOutput::kTfIdf) out["idf_weights"] = std::move(w);
    return out;
  }

  void write_config(Json& j) const {
    j["max_tokens"] = max_tokens_ ? Json(max_tokens_) : Json();
    j["num_oov_indices"] = num_oov_;
    j["mask_token"] = !mask_ ? Json() : strings_ ? Json(*mask_) : Json(*integer_text(*mask_));
    j["oov_token"] = strings_ ? Json(oov_) : Json(*integer_text(oov_));
    j["output_mode"] = lookup_output_name(mode_);
    j["invert"] = invert_;
    j["sparse"] = false;
    j["pad_to_max_tokens"] = pad_to_max_tokens_;
    j["vocabulary"] = vocab_json_;
    j["idf_weights"] = idf_json_;
    j["vocabulary_size"] = vocabulary_size();
    j["vocabulary_dtype"] = strings_ ? "string" : "int64";
    if (strings_) j["encoding"] = "utf-8";
  }

 private:
  // A special token: a string (StringLookup) or an integer (IntegerLookup), kept as its text.
  std::optional<std::string> token(LayerConfig& c, const std::string& key,
                                   std::optional<std::string> def) const {
    const Json* v = c.get_raw(key);
    if (!v) return def;
    if (v->is_null()) return std::nullopt;
    if (strings_ && v->is_string()) return v->get<std::string>();
    if (!strings_ && v->is_number_integer()) return std::to_string(v->get<int64_t>());
    c.fail(key, strings_ ? "a string or null" : "an integer or null");
  }
  std::vector<std::string> specials() const {
    std::vector<std::string> s;
    if (oov_start() == 1) s.push_back(*mask_);
    for (int64_t i = 0; i < num_oov_; ++i) s.push_back(oov_);
    return s;
  }
  void index_integers(LayerConfig& c) {
    for (size_t k = 0; k < vocab_.tokens.size(); ++k) {
      const std::optional<int64_t> v = integer_text(vocab_.tokens[k]);
      if (!v) c.fail("vocabulary", "integers for IntegerLookup, got '" + vocab_.tokens[k] + "'");
      int_index_[*v] = static_cast<int64_t>(k);
      int_terms_.push_back(*v);
    }
  }
  void read_idf(LayerConfig& c) {
    const Json* w = c.get_raw("idf_weights");
    if (w && !w->is_null()) idf_json_ = *w;
    if (mode_ != LookupOutput::kTfIdf) {
      if (!idf_json_.is_null()) c.fail("idf_weights", "null unless output_mode is \"tf_idf\"");
      return;
    }
    if (vocab_.tokens.empty()) return;
    std::vector<float> given;
    if (idf_json_.is_array())
      for (const Json& x : idf_json_) {
        if (!x.is_number()) c.fail("idf_weights", "a list of numbers");
        given.push_back(x.get<float>());
      }
    // One weight per term, or per id with the special tokens first (the vocabulary may come
    // from the .keras assets with them while the weights were given without).
    const size_t terms = vocab_.tokens.size(), ids = terms + specials().size();
    if (given.size() != terms && given.size() != ids)
      c.fail("idf_weights", "one weight per vocabulary term (" + std::to_string(terms) + ", or " +
                                std::to_string(ids) + " with the special tokens)");
    // As Keras: without the special tokens in the list, they get the mean weight.
    if (given.size() == terms) {
      double sum = 0;
      for (float x : given) sum += x;
      given.insert(given.begin(), static_cast<size_t>(token_start()),
                   static_cast<float>(sum / static_cast<double>(given.size())));
    }
    idf_ = std::move(given);
  }

  bool strings_;
  int64_t max_tokens_ = 0, num_oov_ = 1;
  std::optional<std::string> mask_;
  std::string oov_;
  LookupOutput mode_ = LookupOutput::kInt;
  bool invert_ = false, pad_to_max_tokens_ = false;
  Json vocab_json_, idf_json_;
  Vocabulary vocab_;
  std::unordered_map<int64_t, int64_t> int_index_;  // IntegerLookup: term -> position
  std::vector<int64_t> int_terms_;
  std::optional<int64_t> mask_int_, oov_int_;
  std::vector<float> idf_;
};

class StringLookup final : public StringLayer {
 public:
  StringLookup(LayerConfig& c, const std::string& name) : StringLayer(name), core_(c, true) {
    if (core_.invert())
      c.fail("invert",
             "false (inverted, StringLookup makes strings, which nnfleet's float "
             "graph does not carry)");
  }
  const char* class_name() const override { return "StringLookup"; }
  Shape encoded_shape(const Shape& strings) const override { return core_.out_shape(strings); }
  void encode(const std::string* strings, int64_t n, int64_t per_sample,
              float* out) const override {
    const bool ints = core_.mode() == LookupOutput::kInt;
    const int64_t width = ints ? per_sample : core_.bag_width(per_sample);
    for (int64_t i = 0; i < n; ++i) {
      float* row = out + i * width;
      if (!ints) std::memset(row, 0, static_cast<size_t>(width) * sizeof(float));
      for (int64_t j = 0; j < per_sample; ++j) {
        const int64_t id = core_.string_id(strings[i * per_sample + j]);
        if (ints)
          row[j] = static_cast<float>(id);
        else
          core_.bag_add(id, j, per_sample, row);
      }
      core_.bag_scale(row);
    }
  }
  int64_t id_bound() const override {
    return core_.mode() == LookupOutput::kInt ? core_.vocabulary_size() : 0;
  }
  std::vector<std::string> full_vocabulary() const override { return core_.full_vocabulary(); }
  Json adapt(const std::string* s, int64_t n, int64_t per_sample) const override {
    return core_.has_vocabulary() ? Json() : core_.adapt(s, n, per_sample);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    core_.write_config(j);
    return j;
  }

 private:
  IndexLookup core_;
};

class IntegerLookup final : public Layer {
 public:
  IntegerLookup(LayerConfig& c, const std::string& name) : Layer(name), core_(c, false) {}
  const char* class_name() const override { return "IntegerLookup"; }
  Shape output_shape(const std::vector<Shape>& in) const override { return core_.out_shape(in[0]); }
  void forward(const LayerArgs& a) const override {
    const int64_t k = a.in_shapes[0].size();
    const bool ints = core_.mode() == LookupOutput::kInt;
    const int64_t width = ints ? k : core_.bag_width(k);
    for (int64_t i = 0; i < a.n; ++i) {
      const float* x = a.x[0] + i * k;
      float* y = a.y + i * width;
      if (!ints) std::memset(y, 0, static_cast<size_t>(width) * sizeof(float));
      for (int64_t j = 0; j < k; ++j) {
        const int64_t v = integer(x[j]);
        if (core_.invert())
          y[j] = core_.inverted(v);
        else if (ints)
          y[j] = static_cast<float>(core_.integer_id(v, static_cast<float>(v) == x[j]));
        else
          core_.bag_add(core_.integer_id(v, static_cast<float>(v) == x[j]), j, k, y);
      }
      core_.bag_scale(y);
    }
  }
  // A lookup is piecewise constant: no gradient reaches its input.
  void backward(const LayerArgs&) const override {}
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    core_.write_config(j);
    return j;
  }
  Json adapt(const std::vector<double>& values, int64_t per_sample) const {
    return core_.has_vocabulary() ? Json() : core_.adapt_integers(values, per_sample);
  }

 private:
  static int64_t integer(float v) {
    // Ids past +-2^62 are no id nnfleet's float data carries exactly; clamped, they are OOV.
    if (!std::isfinite(v)) return INT64_MIN / 2;
    return static_cast<int64_t>(std::fmax(std::fmin(v, 4.6e18f), -4.6e18f));
  }
  IndexLookup core_;
};

}  // namespace

std::unique_ptr<Layer> make_string_lookup(LayerConfig& c, const std::string& name) {
  return std::make_unique<StringLookup>(c, name);
}
std::unique_ptr<Layer> make_integer_lookup(LayerConfig& c, const std::string& name) {
  return std::make_unique<IntegerLookup>(c, name);
}

Json integer_lookup_adapt(const Layer& l, const std::vector<double>& values, int64_t per_sample) {
  const auto* il = dynamic_cast<const IntegerLookup*>(&l);
  return il ? il->adapt(values, per_sample) : Json();
}

std::vector<LayerExample> string_lookup_examples() {
  // The float graph sees the encoded rows: the identity over them.
  const Json vocab = Json::array({"a", "b", "c"});
  return {{{{"vocabulary", vocab}}, {Shape{1}}},
          {{{"vocabulary", vocab}, {"output_mode", "one_hot"}}, {Shape{4}}},
          {{{"vocabulary", vocab}, {"output_mode", "multi_hot"}}, {Shape{4}}},
          {{{"vocabulary", vocab}, {"output_mode", "count"}}, {Shape{4}}},
          {{{"vocabulary", vocab},
            {"output_mode", "tf_idf"},
            {"idf_weights", Json::array({0.5, 1.0, 1.5})}},
           {Shape{4}}}};
}

std::vector<LayerExample> integer_lookup_examples() {
  // Random floats are no integer: all OOV, the output constant and the gradient zero on both
  // sides (tests/layers/lookup_layers_test.cpp checks the ids themselves).
  const Json vocab = Json::array({1, 3, 4});
  std::vector<LayerExample> out;
  for (const char* mode : {"int", "one_hot", "multi_hot", "count"})
    out.push_back({{{"vocabulary", vocab}, {"output_mode", mode}}, {Shape{3}}});
  out.push_back({{{"vocabulary", vocab},
                  {"output_mode", "tf_idf"},
                  {"idf_weights", Json::array({0.5, 1.0, 1.5})}},
                 {Shape{4}}});
  out.push_back({{{"vocabulary", vocab}, {"invert", true}, {"mask_token", 0}}, {Shape{2}}});
  return out;
}

}  // namespace nnfleet
