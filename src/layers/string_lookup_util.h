// What the vocabulary layers (TextVectorization, StringLookup, IntegerLookup) share: Keras's
// output modes, its vocabulary rules (IndexLookup.set_vocabulary) and the bag encodings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/config.h"

namespace nnfleet {

enum class LookupOutput { kInt, kOneHot, kMultiHot, kCount, kTfIdf };
// Reads "output_mode" (default "int"; Keras's old "binary" and "tf-idf" accepted); one_hot only
// when the layer has it (the lookups, not TextVectorization).
LookupOutput parse_lookup_output(LayerConfig& c, bool one_hot);
const char* lookup_output_name(LookupOutput m);

// The learned terms, without the special tokens (mask, OOV) that come before them in ids.
struct Vocabulary {
  std::vector<std::string> tokens;
  std::unordered_map<std::string, int64_t> index;  // term -> its position in tokens
  bool had_specials = false;                       // the given list started with the special tokens
  int64_t find(const std::string& t) const {
    auto it = index.find(t);
    return it == index.end() ? -1 : it->second;
  }
};
// The terms of a config's vocabulary (strings; integers as their decimal text); null: none.
std::vector<std::string> vocabulary_from_json(LayerConfig& c, const std::string& key,
                                              const Json& v);
// Keras's rules: when the list starts with `specials` (the mask and OOV tokens, in id order)
// they are taken off; the terms must be unique, must not hold the mask token, and with the
// specials fit in max_tokens (0: no limit). Throws ConfigError on "vocabulary".
Vocabulary make_vocabulary(LayerConfig& c, const std::vector<std::string>& given,
                           const std::vector<std::string>& specials,
                           const std::optional<std::string>& mask, int64_t max_tokens);
// Keras's adapt order: by count, most frequent first, ties by the term's bytes in reverse order
// (numpy lexsort over (tokens, counts), reversed), then the first `keep` (< 0: all).
std::vector<std::string> adapt_order(const std::unordered_map<std::string, int64_t>& counts,
                                     int64_t keep);

// One sample's ids as a row of `depth` floats: multi_hot / one_hot 1 where an id occurs, count
// the times it occurs, tf_idf the count times idf[id]. Ids < 0 (the mask) and >= depth are
// dropped.
void encode_bag(const std::vector<int64_t>& ids, LookupOutput mode, int64_t depth,
                const std::vector<float>& idf, float* row);

// What IntegerLookup's adapt sets ({"vocabulary": [...]}, with tf_idf also "idf_weights") from
// the training rows' values (integers; other values are left out), for an IntegerLookup without
// a vocabulary; null for any other layer. Keras's order: by count, ties by the larger value.
class Layer;
Json integer_lookup_adapt(const Layer& l, const std::vector<double>& values, int64_t per_sample);

}  // namespace nnfleet
