// TextVectorization, Keras semantics: each sample's one string is standardized
// ("lower_and_strip_punctuation", "lower", "strip_punctuation" or None; ASCII lower-casing as
// tf.strings.lower without an encoding, and the 32 ASCII punctuation characters of Keras's
// DEFAULT_STRIP_REGEX), split ("whitespace": runs of ASCII whitespace; "character": UTF-8
// characters; None: the whole string), extended with ngrams (joined by one space, all 1-grams
// first, then 2-grams, ...), and looked up in the vocabulary: id 0 is the mask token '' and id 1
// '[UNK]' (every unknown term) in "int" mode, whose ids are cut or padded with 0 to
// output_sequence_length; the other modes make one row of the vocabulary's size (or max_tokens
// with pad_to_max_tokens), where '[UNK]' is id 0. A string layer (string_layer.h): the ids are
// made when data is bound to the model, and the layer is the identity in the float graph.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <unordered_map>

#include "layers/kinds.h"
#include "layers/layer_util.h"
#include "layers/string_layer.h"
#include "layers/string_lookup_util.h"

namespace nnfleet {
namespace {

const std::string kUnknown = "[UNK]";

class TextVectorization final : public StringLayer {
 public:
  TextVectorization(LayerConfig& c, const std::string& name) : StringLayer(name) {
    max_tokens_ = c.has("max_tokens") ? c.get_int("max_tokens", {}, 2) : 0;
    if (!c.has("max_tokens")) c.ignore("max_tokens");
    standardize_ = optional_choice(c, "standardize", "lower_and_strip_punctuation",
                                   {"lower_and_strip_punctuation", "lower", "strip_punctuation"});
    split_ = optional_choice(c, "split", "whitespace", {"whitespace", "character"});
    read_ngrams(c);
    mode_ = parse_lookup_output(c, false);
    pad_to_max_tokens_ = c.get_bool("pad_to_max_tokens", false);
    if (pad_to_max_tokens_ && max_tokens_ == 0)
      c.fail("pad_to_max_tokens", "false without max_tokens (Keras's rule)");
    if (c.has("output_sequence_length")) {
      if (mode_ != LookupOutput::kInt)
        c.fail("output_sequence_length", "null unless output_mode is \"int\"");
      seq_len_ = c.get_int("output_sequence_length");
    } else {
      c.ignore("output_sequence_length");
      if (mode_ == LookupOutput::kInt)
        c.fail("output_sequence_length",
               "a length for output_mode \"int\" (nnfleet needs a fixed output shape; Keras "
               "pads each batch to its longest text without it)");
    }
    for (const char* k : {"sparse", "ragged"})
      if (c.get_bool(k, false)) c.fail(k, "false (nnfleet makes dense rows)");
    c.get_string("encoding", std::string("utf-8"), {"utf-8"});
    c.ignore("vocabulary_size");  // Keras 3 writes the size it computed; recomputed here
    c.ignore("vocabulary_dtype");
    if (const Json* v = c.get_raw("vocabulary")) vocab_json_ = *v;
    vocab_ = make_vocabulary(c, vocabulary_from_json(c, "vocabulary", vocab_json_), specials(),
                             std::string(), max_tokens_);
    read_idf(c);
  }
  const char* class_name() const override { return "TextVectorization"; }

  Shape encoded_shape(const Shape& strings) const override {
    if (strings.size() != 1 || strings.rank() > 1)
      throw ModelError(
          "reads one string per sample; expected a string input of shape (None,) "
          "or (None, 1), got " +
          keras_shape(strings));
    if (mode_ == LookupOutput::kInt) return Shape{seq_len_};
    if (depth() <= 1)
      throw ModelError("has no vocabulary for output_mode \"" +
                       std::string(lookup_output_name(mode_)) +
                       "\"; expected a vocabulary (in the config or the .keras assets) or "
                       "adapt: true in the plan");
    return Shape{depth()};
  }
  int64_t id_bound() const override {
    return mode_ == LookupOutput::kInt ? token_start() + static_cast<int64_t>(vocab_.tokens.size())
                                       : 0;
  }

  std::vector<std::string> full_vocabulary() const override {
    if (vocab_.tokens.empty()) return {};
    std::vector<std::string> v = specials();
    v.insert(v.end(), vocab_.tokens.begin(), vocab_.tokens.end());
    return v;
  }

  void encode(const std::string* strings, int64_t n, int64_t per_sample,
              float* out) const override {
    const int64_t width = mode_ == LookupOutput::kInt ? seq_len_ : depth();
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < n; ++i) {
      ids.clear();
      for (const std::string& t : terms(strings[i * per_sample])) ids.push_back(id_of(t));
      float* row = out + i * width;
      if (mode_ == LookupOutput::kInt) {
        for (int64_t j = 0; j < width; ++j)
          row[j] = j < static_cast<int64_t>(ids.size()) ? static_cast<float>(ids[j]) : 0.0f;
      } else {
        encode_bag(ids, mode_, width, idf_, row);
      }
    }
  }

  // The terms of one text: standardized, split and extended with ngrams.
  std::vector<std::string> terms(const std::string& text) const {
    std::string s = text;
    if (standardize_ == "lower_and_strip_punctuation" || standardize_ == "lower")
      s = ascii_lower(std::move(s));
    if (standardize_ == "lower_and_strip_punctuation" || standardize_ == "strip_punctuation")
      s = strip_ascii_punctuation(s);
    std::vector<std::string> words;
    if (split_ == "whitespace")
      words = split_ascii_whitespace(s);
    else if (split_ == "character")
      words = utf8_characters(s);
    else
      words = {s};
    if (ngrams_.empty()) return words;
    std::vector<std::string> out;
    for (int64_t w : ngrams_)
      for (size_t b = 0; b + static_cast<size_t>(w) <= words.size(); ++b) {
        std::string g = words[b];
        for (size_t k = 1; k < static_cast<size_t>(w); ++k) g += " " + words[b + k];
        out.push_back(std::move(g));
      }
    return out;
  }
  // Keras's adapt over these texts: the vocabulary it learns, special tokens first, and with
  // tf_idf the idf weights log(1 + texts / (1 + texts holding the term)), '[UNK]' taking their
  // mean.
  Json adapt(const std::string* texts, int64_t n, int64_t per_sample) const override {
    if (!vocab_.tokens.empty() || per_sample != 1) return nullptr;
    std::unordered_map<std::string, int64_t> counts, docs;
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<std::string> ts = terms(texts[i]);
      for (const std::string& t : ts) ++counts[t];
      for (const std::string& t : std::set<std::string>(ts.begin(), ts.end())) ++docs[t];
    }
    counts.erase(std::string());
    counts.erase(kUnknown);
    Json v = Json::array(), idf = Json::array();
    for (const std::string& s : specials()) v.push_back(s);
    double sum = 0;
    for (const std::string& t :
         adapt_order(counts, max_tokens_ ? max_tokens_ - token_start() : -1)) {
      v.push_back(t);
      idf.push_back(std::log(1.0 + static_cast<double>(n) / (1.0 + static_cast<double>(docs[t]))));
      sum += idf.back().get<double>();
    }
    Json out = {{"vocabulary", v}};
    if (mode_ == LookupOutput::kTfIdf) {
      idf.insert(idf.begin(), idf.empty() ? 0.0 : sum / static_cast<double>(idf.size()));
      out["idf_weights"] = std::move(idf);
    }
    return out;
  }

  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["max_tokens"] = max_tokens_ ? Json(max_tokens_) : Json();
    j["standardize"] = standardize_.empty() ? Json() : Json(standardize_);
    j["split"] = split_.empty() ? Json() : Json(split_);
    j["ngrams"] = ngrams_json_;
    j["output_mode"] = lookup_output_name(mode_);
    j["output_sequence_length"] = seq_len_ ? Json(seq_len_) : Json();
    j["pad_to_max_tokens"] = pad_to_max_tokens_;
    j["sparse"] = false;
    j["ragged"] = false;
    j["vocabulary"] = vocab_json_;
    j["idf_weights"] = idf_json_;
    j["encoding"] = "utf-8";
    j["vocabulary_size"] = token_start() + static_cast<int64_t>(vocab_.tokens.size());
    return j;
  }

 private:
  static std::string optional_choice(LayerConfig& c, const std::string& key, const char* def,
                                     const std::vector<std::string>& allowed) {
    if (const Json* v = c.get_raw(key); v && v->is_null()) return {};
    return c.get_string(key, std::string(def), allowed);
  }
  void read_ngrams(LayerConfig& c) {
    const Json* g = c.get_raw("ngrams");
    if (!g || g->is_null()) return;
    ngrams_json_ = *g;
    if (g->is_number_integer()) {
      const int64_t n = g->get<int64_t>();
      if (n < 1 || n > 16) c.fail("ngrams", "an integer 1..16, a list of them, or null");
      for (int64_t w = 1; w <= n; ++w) ngrams_.push_back(w);
      return;
    }
    if (!g->is_array() || g->empty()) c.fail("ngrams", "an integer 1..16, a list of them, or null");
    for (const Json& w : *g) {
      if (!w.is_number_integer() || w.get<int64_t>() < 1 || w.get<int64_t>() > 16)
        c.fail("ngrams", "an integer 1..16, a list of them, or null");
      ngrams_.push_back(w.get<int64_t>());
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
    if (!idf_json_.is_array()) c.fail("idf_weights", "a list of weights with the vocabulary");
    std::vector<float> given;
    for (const Json& x : idf_json_) {
      if (!x.is_number()) c.fail("idf_weights", "a list of numbers");
      given.push_back(x.get<float>());
    }
    const size_t terms = vocab_.tokens.size() + (vocab_.had_specials ? 1 : 0);
    if (given.size() != terms)
      c.fail("idf_weights", "one weight per vocabulary term (" + std::to_string(terms) + "), got " +
                                std::to_string(given.size()));
    // As Keras: without the special token in the list, '[UNK]' gets the mean weight.
    if (!vocab_.had_specials) {
      double sum = 0;
      for (float x : given) sum += x;
      given.insert(given.begin(), static_cast<float>(sum / static_cast<double>(given.size())));
    }
    idf_ = std::move(given);
  }
  static std::vector<std::string> utf8_characters(const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      len = std::min(len, s.size() - i);
      out.emplace_back(s, i, len);
      i += len;
    }
    return out;
  }
  // int: '' (id 0) then '[UNK]' (id 1); the bag modes have no mask slot: '[UNK]' is id 0.
  std::vector<std::string> specials() const {
    if (mode_ == LookupOutput::kInt) return {std::string(), kUnknown};
    return {kUnknown};
  }
  int64_t token_start() const { return mode_ == LookupOutput::kInt ? 2 : 1; }
  int64_t depth() const {
    return pad_to_max_tokens_ ? max_tokens_
                              : token_start() + static_cast<int64_t>(vocab_.tokens.size());
  }
  int64_t id_of(const std::string& t) const {
    if (t.empty()) return mode_ == LookupOutput::kInt ? 0 : -1;  // the mask token
    const int64_t k = vocab_.find(t);
    if (k >= 0) return token_start() + k;
    return mode_ == LookupOutput::kInt ? 1 : 0;  // '[UNK]'
  }

  int64_t max_tokens_ = 0, seq_len_ = 0;
  std::string standardize_, split_;
  std::vector<int64_t> ngrams_;
  Json ngrams_json_, vocab_json_, idf_json_;
  LookupOutput mode_ = LookupOutput::kInt;
  bool pad_to_max_tokens_ = false;
  Vocabulary vocab_;
  std::vector<float> idf_;
};

}  // namespace

std::unique_ptr<Layer> make_text_vectorization(LayerConfig& c, const std::string& name) {
  return std::make_unique<TextVectorization>(c, name);
}

std::vector<LayerExample> text_vectorization_examples() {
  // The float graph sees the encoded rows: the identity over them.
  const Json vocab = Json::array({"the", "cat", "sat"});
  return {
      {{{"output_mode", "int"}, {"output_sequence_length", 5}, {"vocabulary", vocab}}, {Shape{5}}},
      {{{"output_mode", "multi_hot"}, {"vocabulary", vocab}}, {Shape{4}}},
      {{{"output_mode", "count"}, {"vocabulary", vocab}}, {Shape{4}}},
      {{{"output_mode", "tf_idf"},
        {"vocabulary", vocab},
        {"idf_weights", Json::array({0.5, 1.0, 1.5})}},
       {Shape{4}}}};
}

}  // namespace nnfleet
