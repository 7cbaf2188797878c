// yaml-cpp 0.7's emitter (src/emitter.cpp, emitterstate.cpp, emitterutils.cpp) reduced to what
// plan.yaml uses: no anchors, tags, comments, long keys or literal scalars, one document, indent
// 2. The layout functions keep yaml-cpp's names and order of decisions so that the two can be
// read side by side; the plain-scalar test replaces its RegEx objects (exp.h) with byte checks.
#include "plan/yaml_emitter.h"

#include <charconv>
#include <cstring>

#include "core/check.h"

namespace nnfleet::plan_detail {
namespace {

constexpr int kEnd = -1;  // past the end of the string

int byte_at(std::string_view s, size_t i) {
  return i < s.size() ? static_cast<unsigned char>(s[i]) : kEnd;
}
// yaml-cpp's Break: "\n" or "\r\n" (a lone '\r' is not a break).
bool break_at(std::string_view s, size_t i) {
  const int c = byte_at(s, i);
  return c == '\n' || (c == '\r' && byte_at(s, i + 1) == '\n');
}
bool blank_at(std::string_view s, size_t i) {
  const int c = byte_at(s, i);
  return c == ' ' || c == '\t';
}
bool blank_or_break_at(std::string_view s, size_t i) { return blank_at(s, i) || break_at(s, i); }
bool one_of(int c, const char* set) { return c > 0 && std::strchr(set, c) != nullptr; }

// Exp::NotPrintable: C0 controls but tab, LF and CR; DEL; and the C1 controls but NEL, which
// yaml-cpp matches as the UTF-8 bytes C2 80..84 and C2 86..9F.
bool not_printable_at(std::string_view s, size_t i) {
  const int c = byte_at(s, i);
  if (c <= 0x08 || c == 0x0b || c == 0x0c || (c >= 0x0e && c <= 0x1f) || c == 0x7f) return true;
  if (c != 0xc2) return false;
  const int d = byte_at(s, i + 1);
  return (d >= 0x80 && d <= 0x84) || (d >= 0x86 && d <= 0x9f);
}

// The disallowed_block / disallowed_flow expressions of IsValidPlainScalar, at offset i.
bool disallowed_at(std::string_view s, size_t i, bool flow) {
  const int c = byte_at(s, i);
  if (c == ':') {  // EndScalar (flow: EndScalarInFlow's first half)
    const int d = byte_at(s, i + 1);
    if (d == kEnd || blank_or_break_at(s, i + 1) || (flow && one_of(d, ",]}"))) return true;
  }
  if (flow && one_of(c, ",?[]{}")) return true;
  // BlankOrBreak + Comment; a tab or break is disallowed below anyway.
  if (c == ' ' && byte_at(s, i + 1) == '#') return true;
  if (not_printable_at(s, i)) return true;
  if (c == 0xef && byte_at(s, i + 1) == 0xbb && byte_at(s, i + 2) == 0xbf) return true;  // BOM
  return break_at(s, i) || c == '\t';
}

// GetNextCodePointAndAdvance: one code point from s[i...], U+FFFD for a malformed sequence
// (a bad lead byte is skipped; a sequence cut short keeps the byte that cut it).
int next_code_point(std::string_view s, size_t& i) {
  constexpr int kReplacement = 0xfffd;
  const auto lead = static_cast<unsigned char>(s[i]);
  int n = 0;
  switch (lead >> 4) {
    case 12:
    case 13:
      n = 2;
      break;
    case 14:
      n = 3;
      break;
    case 15:
      n = 4;
      break;
    default:
      n = lead < 0x80 ? 1 : -1;
  }
  ++i;
  if (n < 1) return kReplacement;
  if (n == 1) return lead;
  int cp = lead & ~(0xff << (7 - n));
  for (--n; n > 0; ++i, --n) {
    if (i == s.size() || (s[i] & 0xc0) != 0x80) return kReplacement;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp & 0xfffe) == 0xfffe ||
      (cp >= 0xfdd0 && cp <= 0xfdef))
    return kReplacement;
  return cp;
}

void put_code_point(int cp, std::string& out) {
  if (cp <= 0x7f) {
    out += static_cast<char>(cp);
  } else if (cp <= 0x7ff) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp <= 0xffff) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// WriteDoubleQuoteEscapeSequence for the code points it is called with here (below U+FFFF).
void put_escape(int cp, std::string& out) {
  static const char kHex[] = "0123456789abcdef";
  const int digits = cp < 0xff ? 2 : 4;
  out += cp < 0xff ? "\\x" : "\\u";
  for (int d = digits; d > 0; --d) out += kHex[(cp >> (4 * (d - 1))) & 0xf];
}

}  // namespace

bool yaml_plain_ok(std::string_view s, bool flow) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return false;
  // Exp::PlainScalar / PlainScalarInFlow: how a plain scalar may start.
  const int c = byte_at(s, 0);
  if (blank_or_break_at(s, 0)) return false;
  if (one_of(c, flow ? "?,[]{}#&*!|>'\"%@`" : ",[]{}#&*!|>'\"%@`")) return false;
  if (flow ? (one_of(c, "-:") && (s.size() == 1 || blank_at(s, 1)))
           : (one_of(c, "-?:") && (s.size() == 1 || blank_or_break_at(s, 1))))
    return false;
  if (s.back() == ' ') return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (disallowed_at(s, i, flow)) return false;
  return true;
}

void yaml_double_quoted(std::string_view s, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const int cp = next_code_point(s, i);
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (cp < 0x20 || (cp >= 0x80 && cp <= 0xa0) || cp == 0xfeff)
          put_escape(cp, out);
        else
          put_code_point(cp, out);
    }
  }
  out += '"';
}

void YamlEmitter::integer(int64_t v) {
  char buf[24];
  scalar(std::string_view(buf, std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
}

void YamlEmitter::unsigned_integer(uint64_t v) {
  char buf[24];
  scalar(std::string_view(buf, std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
}

void YamlEmitter::string(std::string_view s, bool double_quoted) {
  const bool key = !groups_.empty() && !groups_.back().seq && groups_.back().children % 2 == 0;
  if (key && s.size() > 1024) ok_ = false;
  const bool plain = !double_quoted && yaml_plain_ok(s, in_flow());
  prepare(Node::kScalar);
  if (plain) {
    put(s);  // a plain scalar holds no line break
  } else {
    const size_t before = out_.size();
    yaml_double_quoted(s, out_);  // escapes every line break
    col_ += out_.size() - before;
  }
  if (!groups_.empty()) ++groups_.back().children;
}

void YamlEmitter::scalar(std::string_view text) {
  prepare(Node::kScalar);
  put(text);
  if (!groups_.empty()) ++groups_.back().children;
}

// EmitBeginSeq / EmitBeginMap, then EmitterState::StartedGroup.
void YamlEmitter::begin(bool seq, bool flow) {
  flow = flow || in_flow();
  prepare(seq ? (flow ? Node::kFlowSeq : Node::kBlockSeq)
              : (flow ? Node::kFlowMap : Node::kBlockMap));
  if (!groups_.empty()) {
    ++groups_.back().children;
    indent_ += kIndent;
  }
  groups_.push_back({seq, flow});
}

// EmitEndSeq / EmitEndMap, then EmitterState::EndedGroup.
void YamlEmitter::end(char open, char close) {
  Group& g = groups_.back();
  const bool was_flow = g.flow;
  if (g.children == 0) g.flow = true;  // ForceFlow
  if (g.flow) {
    indent_to(indent_);
    if (!was_flow || g.children == 0) put(open);
    put(close);
  }
  groups_.pop_back();
  if (!groups_.empty()) indent_ -= kIndent;
}

YamlEmitter YamlEmitter::fork(size_t after) const {
  NNFLEET_CHECK(!groups_.empty());
  YamlEmitter e;
  e.col_ = col_;
  e.indent_ = indent_;
  e.groups_ = groups_;
  // What a later item's layout depends on: how many came before it (an item after the first
  // starts on a new line, where the column restarts). A mapping's items are keys and values.
  e.groups_.back().children += after;
  if (after > 0) e.col_ = 1;
  return e;
}

void YamlEmitter::join(const YamlEmitter& part) {
  NNFLEET_CHECK(part.groups_.size() == groups_.size() && part.indent_ == indent_);
  out_ += part.out_;
  col_ = part.col_;
  groups_.back().children = part.groups_.back().children;
  ok_ = ok_ && part.ok_;
}

void YamlEmitter::prepare(Node child) {
  if (groups_.empty()) return;  // PrepareTopNode: nothing to write at column 0
  const Group& g = groups_.back();
  if (g.flow)
    prepare_flow(child, g.seq);
  else if (g.seq)
    prepare_block_seq(child);
  else
    prepare_block_map(child);
}

void YamlEmitter::prepare_block_seq(Node child) {
  if (groups_.back().children > 0) put('\n');
  indent_to(indent_);
  put('-');
  if (child == Node::kBlockSeq)
    put('\n');
  else if (child != Node::kBlockMap)
    space_or_indent_to(false, indent_ + kIndent);
}

// BlockMapPrepareSimpleKey / BlockMapPrepareSimpleKeyValue (keys are scalars here).
void YamlEmitter::prepare_block_map(Node child) {
  const bool block = child == Node::kBlockSeq || child == Node::kBlockMap;
  if (groups_.back().children % 2 == 0) {
    if (groups_.back().children > 0) put('\n');
    if (!block) space_or_indent_to(false, indent_);
  } else {
    put(':');
    if (block)
      put('\n');
    else
      space_or_indent_to(true, indent_ + kIndent);
  }
}

// FlowSeqPrepareNode, FlowMapPrepareSimpleKey and FlowMapPrepareSimpleKeyValue.
void YamlEmitter::prepare_flow(Node, bool seq) {
  const size_t last = last_indent();
  const size_t children = groups_.back().children;
  indent_to(last);
  if (seq || children % 2 == 0)
    put(children == 0 ? (seq ? '[' : '{') : ',');
  else
    put(':');
  space_or_indent_to(children > 0, last);
}

void YamlEmitter::space_or_indent_to(bool require_space, size_t indent) {
  if (col_ > 0 && require_space) put(' ');
  indent_to(indent);
}

void YamlEmitter::indent_to(size_t indent) {
  if (col_ < indent) {
    out_.append(indent - col_, ' ');
    col_ = indent;
  }
}

void YamlEmitter::put(std::string_view s) {
  out_ += s;
  col_ += s.size();
}

void YamlEmitter::put(char c) {
  out_ += c;
  col_ = c == '\n' ? 0 : col_ + 1;
}

size_t yaml_unprintable_at(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i)
    if (not_printable_at(text, i)) return i;
  return std::string_view::npos;
}

}  // namespace nnfleet::plan_detail
