// The string front's shared parts (string_layer.h): the identity over encoded floats, Keras's
// ASCII text defaults, and the bag encodings (multi_hot / count / tf_idf) of the lookup layers.
#include "layers/string_layer.h"

#include <algorithm>
#include <cstring>

#include "layers/layer_util.h"
#include "layers/string_lookup_util.h"

namespace nnfleet {

void StringLayer::forward(const LayerArgs& a) const {
  if (a.y != a.x[0]) std::memcpy(a.y, a.x[0], rows_floats(a.n, a.in_shapes[0]) * sizeof(float));
}

// A string input takes no gradient (dx is null there); other callers (the gradient check) see
// the identity's.
void StringLayer::backward(const LayerArgs& a) const {
  if (!a.dx || !a.dx[0] || a.dx[0] == a.dy) return;
  const size_t m = rows_floats(a.n, a.in_shapes[0]);
  for (size_t i = 0; i < m; ++i) a.dx[0][i] += a.dy[i];
}

std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string strip_ascii_punctuation(const std::string& s) {
  // Python's string.punctuation: the 32 ASCII characters Keras's DEFAULT_STRIP_REGEX removes.
  static const char* kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  std::string out;
  out.reserve(s.size());
  for (char c : s)
    if (c == '\0' || !std::strchr(kPunctuation, c)) out.push_back(c);
  return out;
}

std::vector<std::string> split_ascii_whitespace(const std::string& s) {
  // TF's whitespace split (absl::ascii_isspace): space, \t, \n, \v, \f, \r.
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && space(s[i])) ++i;
    const size_t b = i;
    while (i < s.size() && !space(s[i])) ++i;
    if (i > b) out.emplace_back(s, b, i - b);
  }
  return out;
}

LookupOutput parse_lookup_output(LayerConfig& c, bool one_hot) {
  std::vector<std::string> allowed = {"int", "multi_hot", "count", "tf_idf"};
  if (one_hot) allowed.insert(allowed.begin() + 1, "one_hot");
  std::string m = c.get_string("output_mode", std::string("int"));
  // Keras's older names.
  if (m == "binary") m = "multi_hot";
  if (m == "tf-idf") m = "tf_idf";
  if (m == "int") return LookupOutput::kInt;
  if (m == "one_hot" && one_hot) return LookupOutput::kOneHot;
  if (m == "multi_hot") return LookupOutput::kMultiHot;
  if (m == "count") return LookupOutput::kCount;
  if (m == "tf_idf") return LookupOutput::kTfIdf;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  c.fail("output_mode", "one of " + list);
}

const char* lookup_output_name(LookupOutput m) {
  switch (m) {
    case LookupOutput::kInt:
      return "int";
    case LookupOutput::kOneHot:
      return "one_hot";
    case LookupOutput::kMultiHot:
      return "multi_hot";
    case LookupOutput::kCount:
      return "count";
    case LookupOutput::kTfIdf:
      return "tf_idf";
  }
  return "int";
}

void encode_bag(const std::vector<int64_t>& ids, LookupOutput mode, int64_t depth,
                const std::vector<float>& idf, float* row) {
  std::memset(row, 0, static_cast<size_t>(depth) * sizeof(float));
  for (int64_t id : ids) {
    if (id < 0 || id >= depth) continue;  // the mask token, or beyond a fixed depth (dropped)
    if (mode == LookupOutput::kMultiHot || mode == LookupOutput::kOneHot)
      row[id] = 1.0f;
    else
      row[id] += 1.0f;
  }
  if (mode == LookupOutput::kTfIdf)
    for (int64_t j = 0; j < depth; ++j)
      row[j] *= static_cast<size_t>(j) < idf.size() ? idf[static_cast<size_t>(j)] : 0.0f;
}

std::vector<std::string> vocabulary_from_json(LayerConfig& c, const std::string& key,
                                              const Json& v) {
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (!v.is_array()) c.fail(key, "a list of strings or null");
  for (const Json& t : v) {
    if (t.is_string())
      out.push_back(t.get<std::string>());
    else if (t.is_number_integer())
      out.push_back(std::to_string(t.get<int64_t>()));
    else
      c.fail(key, "a list of strings or null");
  }
  return out;
}

Vocabulary make_vocabulary(LayerConfig& c, const std::vector<std::string>& given,
                           const std::vector<std::string>& specials,
                           const std::optional<std::string>& mask, int64_t max_tokens) {
  Vocabulary v;
  v.had_specials = !specials.empty() && given.size() >= specials.size() &&
                   std::equal(specials.begin(), specials.end(), given.begin());
  for (size_t i = v.had_specials ? specials.size() : 0; i < given.size(); ++i) {
    if (mask && given[i] == *mask)
      c.fail("vocabulary", "the mask token '" + *mask +
                               "' only at the start, before the OOV token (term " +
                               std::to_string(i) + " is the mask token)");
    if (!v.index.emplace(given[i], static_cast<int64_t>(v.tokens.size())).second)
      c.fail("vocabulary", "unique terms; '" + given[i] + "' is repeated");
    v.tokens.push_back(given[i]);
  }
  if (max_tokens > 0 && static_cast<int64_t>(specials.size() + v.tokens.size()) > max_tokens)
    c.fail("vocabulary", "at most max_tokens = " + std::to_string(max_tokens) +
                             " terms with the special tokens, got " +
                             std::to_string(specials.size() + v.tokens.size()));
  return v;
}

std::vector<std::string> adapt_order(const std::unordered_map<std::string, int64_t>& counts,
                                     int64_t keep) {
  std::vector<std::pair<int64_t, std::string>> all;
  all.reserve(counts.size());
  for (const auto& [t, n] : counts) all.emplace_back(n, t);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  });
  if (keep >= 0 && static_cast<int64_t>(all.size()) > keep) all.resize(static_cast<size_t>(keep));
  std::vector<std::string> out;
  out.reserve(all.size());
  for (auto& p : all) out.push_back(std::move(p.second));
  return out;
}

}  // namespace nnfleet
