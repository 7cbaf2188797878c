// A YAML emitter for what plan.yaml holds (block and flow mappings and sequences of null, bool,
// integer and string scalars), writing byte for byte what yaml-cpp 0.7's YAML::Emitter writes
// with SetIndent(2) and SetNullFormat(LowerNull): the same layout rules, the same choice between
// plain and double-quoted strings, the same escapes. yaml-cpp decides plain versus quoted with
// its RegEx matcher on every scalar, which was 19% of a tiny model's CPU in a run of 200
// (callgrind); this emitter checks the same rules with a byte scan. The test
// (tests/plan/yaml_emitter_test.cpp) compares both on varied and random documents.
// Internal to src/plan.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nnfleet::plan_detail {

class YamlEmitter {
 public:
  // A collection; `flow` asks for flow style ([a, b], {k: v}). Inside a flow collection every
  // collection is flow, and an empty one is written in flow style, as yaml-cpp does.
  void begin_seq(bool flow) { begin(true, flow); }
  void begin_map(bool flow) { begin(false, flow); }
  void end_seq() { end('[', ']'); }
  void end_map() { end('{', '}'); }
  void null() { scalar("null"); }
  void boolean(bool b) { scalar(b ? "true" : "false"); }
  void integer(int64_t v);
  void unsigned_integer(uint64_t v);
  // A string: plain when yaml-cpp would write it plain (and `double_quoted` is off), else
  // double-quoted with yaml-cpp's escapes. Mapping keys and values alike.
  void string(std::string_view s, bool double_quoted);

  // False once a mapping key of more than 1024 bytes was given: yaml-cpp writes those in its
  // long-key form ("? key"), which this emitter does not; the caller then uses yaml-cpp.
  bool ok() const { return ok_; }
  // The text so far (a whole document once every collection is closed), without the final
  // newline.
  const std::string& text() const { return out_; }

  // Items of the open collection written apart and joined in order, so that several threads
  // can write the items of one long sequence (plan.yaml's models): fork(after) is an emitter
  // with this one's state and no text, standing `after` items further into the collection;
  // join(part) appends what a fork wrote and takes on its state. Joining the forks of
  // consecutive item blocks, in order, gives the text of writing every item here.
  YamlEmitter fork(size_t after) const;
  void join(const YamlEmitter& part);

 private:
  enum class Node { kScalar, kFlowSeq, kBlockSeq, kFlowMap, kBlockMap };
  struct Group {
    bool seq, flow;
    size_t children = 0;
  };

  void begin(bool seq, bool flow);
  void end(char open, char close);
  void scalar(std::string_view text);
  void prepare(Node child);
  void prepare_block_seq(Node child);
  void prepare_block_map(Node child);
  void prepare_flow(Node child, bool seq);
  void space_or_indent_to(bool require_space, size_t indent);
  void indent_to(size_t indent);
  void put(std::string_view s);
  void put(char c);
  size_t last_indent() const { return groups_.size() <= 1 ? 0 : indent_ - kIndent; }
  bool in_flow() const { return !groups_.empty() && groups_.back().flow; }

  static constexpr size_t kIndent = 2;
  std::string out_;
  size_t col_ = 0;     // the column the next byte goes to
  size_t indent_ = 0;  // yaml-cpp's CurIndent: kIndent per enclosing group but the outermost
  std::vector<Group> groups_;
  bool ok_ = true;
};

// Whether yaml-cpp 0.7 writes `s` as a plain scalar inside a block (`flow` false) or a flow
// collection: its IsValidPlainScalar rules (emitterutils.cpp) without the RegEx matcher.
bool yaml_plain_ok(std::string_view s, bool flow);
// Appends `s` double-quoted as yaml-cpp writes it (WriteDoubleQuotedString, no escaping of
// non-ASCII): \" \\ \n \t \r \b \f, \xNN for other control characters and U+0080..U+00A0,
// \ufeff; malformed UTF-8 becomes U+FFFD.
void yaml_double_quoted(std::string_view s, std::string& out);
// The offset of the first character of `text` that YAML does not allow in a document (outside
// c-printable: C0 controls but tab, LF and CR; DEL; C1 controls but NEL), or npos. yaml-cpp
// accepts some of them raw and mangles them (a raw NUL in a key came out as byte 0xA0, which
// the plan's JSON dump then threw on; found by fuzz/fuzz_plan), so plans refuse them.
size_t yaml_unprintable_at(std::string_view text);

}  // namespace nnfleet::plan_detail
