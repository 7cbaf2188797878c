// The <script> elements of a page as an HTML parser splits them, for the report's tests and its
// fuzzer (fuzz/fuzz_report_html.cpp): a script element's text runs through the tokenizer's
// script-data states (WHATWG HTML, "13.2.5 Tokenization": script data, escaped and double
// escaped), where "<!--" and "<script" change where "</script>" ends the element. A search for
// the next "</script>" would miss exactly the case that blanked the report ("<!--<script>" in a
// name). Outside script elements the scan knows only what the report's own template holds:
// comments, <style> and <title> (raw text up to their end tag) and other tags.
#pragma once

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace nnfleet::test_html {

struct ScriptElement {
  std::string start_tag;  // "<script type=...>"
  std::string text;       // what the element holds, as the parser hands it to the script
  bool closed = false;    // ended by an end tag, not by the end of the document
};

namespace detail {

inline bool alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
inline char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
inline bool tag_end(char c) {
  return c == '\t' || c == '\n' || c == '\f' || c == ' ' || c == '/' || c == '>';
}

// Where the tag name starting at s[i] (letters) ends, and that name in lower case.
inline size_t tag_name(std::string_view s, size_t i, std::string& name) {
  name.clear();
  while (i < s.size() && alpha(s[i])) name += lower(s[i++]);
  return i;
}

enum class State { kData, kEscaped, kDoubleEscaped };

// The script-data tokenizer from `at` (just after the start tag's '>'): the index of the '<' of
// the "</script" that ends the element, or npos. "<!--" enters the escaped state; there "<script"
// enters the double-escaped one, whose "</script" only goes back to escaped; "-->" returns to
// plain script data from either.
inline size_t script_end(std::string_view s, size_t at) {
  State st = State::kData;
  std::string name;
  for (size_t i = at; i < s.size(); ++i) {
    if (s.compare(i, 3, "-->") == 0 && st != State::kData) {
      st = State::kData;
      i += 2;
      continue;
    }
    if (s[i] != '<') continue;
    if (st == State::kData && s.compare(i, 4, "<!--") == 0) {
      st = State::kEscaped;
      i += 1;  // "<!--" followed by ">" ("<!-->") is "-->" seen again from the first dash
      continue;
    }
    const bool end = i + 1 < s.size() && s[i + 1] == '/';
    const size_t from = i + (end ? 2 : 1);
    if (from >= s.size() || !alpha(s[from])) continue;
    const size_t after = tag_name(s, from, name);
    const bool whole = after < s.size() && tag_end(s[after]);
    if (name != "script" || !whole) continue;
    if (end && st != State::kDoubleEscaped) return i;
    if (end)
      st = State::kEscaped;
    else if (st == State::kEscaped)
      st = State::kDoubleEscaped;
  }
  return std::string_view::npos;
}

}  // namespace detail

// Every script element of `html`, in order.
inline std::vector<ScriptElement> script_elements(std::string_view html) {
  std::vector<ScriptElement> out;
  std::string name;
  size_t i = 0;
  while ((i = html.find('<', i)) != std::string_view::npos) {
    if (html.compare(i, 4, "<!--") == 0) {
      const size_t e = html.find("-->", i + 4);
      i = e == std::string_view::npos ? html.size() : e + 3;
      continue;
    }
    if (i + 1 >= html.size() || !detail::alpha(html[i + 1])) {
      ++i;
      continue;
    }
    detail::tag_name(html, i + 1, name);
    const size_t gt = html.find('>', i);
    if (gt == std::string_view::npos) break;
    if (name == "style" || name == "title") {  // raw text up to the end tag
      const size_t e = html.find("</" + name, gt);
      i = e == std::string_view::npos ? html.size() : e + 2;
      continue;
    }
    if (name != "script") {
      i = gt + 1;
      continue;
    }
    ScriptElement el;
    el.start_tag = std::string(html.substr(i, gt + 1 - i));
    const size_t e = detail::script_end(html, gt + 1);
    el.closed = e != std::string_view::npos;
    el.text = std::string(html.substr(gt + 1, (el.closed ? e : html.size()) - gt - 1));
    i = el.closed ? e + 2 : html.size();
    out.push_back(std::move(el));
  }
  return out;
}

}  // namespace nnfleet::test_html
