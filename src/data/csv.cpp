// CSV tables: a header row naming the columns, then one sample per line, every cell a number.
//
// Deliberately small: comma separated, cells trimmed of blanks, double-quoted cells (a comma
// inside, "" for a quote; one line each) for header names and for a text column, "\r\n" line ends
// and a UTF-8 byte-order mark accepted, blank lines skipped. Errors name the 1-based line number
// and the column.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "data/dataset.h"

namespace nnfleet {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool blank(std::string_view line) { return trim(line).empty(); }

// Splits a line at commas into `cells` (trimmed views into the line).
void split(std::string_view line, std::vector<std::string_view>* cells) {
  cells->clear();
  for (;;) {
    size_t comma = line.find(',');
    cells->push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return;
    line.remove_prefix(comma + 1);
  }
}

bool parse_number(std::string_view s, double* out) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  // Out-of-range literals ("1e999", "1e-999") become infinities or zero, as in numpy.
  if (ec == std::errc::result_out_of_range && end == s.data() + s.size()) {
    *out = std::strtod(std::string(s).c_str(), nullptr);
    return true;
  }
  return ec == std::errc() && end == s.data() + s.size();
}

// Splits a line at commas outside double quotes: a quoted cell is taken as written between its
// quotes ("" is one quote), any other cell trimmed. False when a quote is left open.
bool split_quoted(std::string_view line, std::vector<std::string>* cells,
                  std::vector<bool>* quoted) {
  cells->clear();
  quoted->clear();
  size_t i = 0;
  for (;;) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::string cell;
    bool q = false;
    if (i < line.size() && line[i] == '"') {
      q = true;
      for (++i;; ++i) {
        if (i >= line.size()) return false;
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            cell += '"';
            ++i;
            continue;
          }
          ++i;
          break;
        }
        cell += line[i];
      }
      size_t comma = line.find(',', i);
      if (!trim(line.substr(i, comma == std::string_view::npos ? comma : comma - i)).empty())
        return false;  // text after the closing quote
      i = comma;
    } else {
      const size_t comma = line.find(',', i);
      cell = std::string(trim(line.substr(i, comma == std::string_view::npos ? comma : comma - i)));
      i = comma;
    }
    cells->push_back(std::move(cell));
    quoted->push_back(q);
    if (i == std::string_view::npos) return true;
    ++i;
  }
}

// Whether a later line of the rest of the file has a quote (then a lone feature column whose
// unquoted cell is not a number is text, not a broken number).
bool text_column_quoted(std::string_view rest) { return rest.find('"') != std::string_view::npos; }

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + printable(n) + "'";
  return s;
}

}  // namespace

CsvData load_csv(const std::string& path, const std::string& label) {
  const std::string text = read_data_file(path);
  std::string_view rest(text);
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);  // UTF-8 byte-order mark

  int64_t line_no = 0;
  auto next_line = [&](std::string_view* line) {
    if (rest.empty()) return false;
    size_t nl = rest.find('\n');
    *line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    ++line_no;
    return true;
  };

  std::string_view line;
  bool have_header = false;
  while (next_line(&line))
    if (!blank(line)) {
      have_header = true;
      break;
    }
  if (!have_header)
    throw_data_error(path, "file is empty; expected a header row, got " +
                               (text.empty() ? std::string("0 bytes")
                                             : std::to_string(line_no) + " blank lines"));

  std::vector<std::string_view> cells;
  split(line, &cells);
  std::vector<std::string> names;
  for (std::string_view c : cells) {
    if (c.size() >= 2 && c.front() == '"' && c.back() == '"') c = c.substr(1, c.size() - 2);
    names.emplace_back(c);
  }
  const size_t cols = names.size();
  int label_col = -1;
  for (size_t j = 0; j < cols; ++j) {
    if (names[j] != label) continue;
    if (label_col >= 0)
      throw_data_error(path, "label column '" + label +
                                 "' appears more than once in the header; "
                                 "expected 1 column, got columns " +
                                 std::to_string(label_col + 1) + " and " + std::to_string(j + 1));
    label_col = static_cast<int>(j);
  }
  if (label_col < 0)
    throw_data_error(path, "no label column named '" + label + "'; expected one of " +
                               quoted_list(names) + ", got '" + label + "'");

  std::vector<float> x;
  std::vector<double> y;
  // With one feature column, that column is text when a cell of it is quoted: kept as strings.
  const size_t text_col = cols == 2 ? static_cast<size_t>(1 - label_col) : cols;
  std::vector<std::string> texts, row;
  std::vector<bool> quoted;
  bool is_text = false;
  while (next_line(&line)) {
    if (blank(line)) continue;
    if (!split_quoted(line, &row, &quoted))
      throw_data_error(path, "unbalanced double quote at line " + std::to_string(line_no) +
                                 "; expected a quoted cell to end on its line, before a comma");
    if (row.size() != cols)
      throw_data_error(path, "ragged row at line " + std::to_string(line_no) + "; expected " +
                                 std::to_string(cols) + " cells, got " +
                                 std::to_string(row.size()));
    for (size_t j = 0; j < cols; ++j) {
      double v;
      if (j == text_col) {
        texts.push_back(row[j]);
        is_text = is_text || quoted[j];
        if (is_text) continue;
      }
      const std::string_view cell = row[j];
      const bool number = parse_number(cell, &v);
      if (!number && (j != text_col || !text_column_quoted(rest)))
        throw_data_error(path, "non-numeric cell at line " + std::to_string(line_no) + ", column " +
                                   std::to_string(j + 1) + " ('" + printable(names[j]) +
                                   "'); expected a number, got '" + printable(cell) + "'");
      if (j == text_col && !number) {
        is_text = true;  // a later cell is quoted: the column is text
      } else if (static_cast<int>(j) == label_col) {
        y.push_back(v);
      } else {
        x.push_back(static_cast<float>(v));
      }
    }
  }
  const int64_t rows = static_cast<int64_t>(y.size());
  if (rows == 0)
    throw_data_error(path, "no data rows; expected at least 1 row after the header, got 0");

  CsvData out;
  for (size_t j = 0; j < cols; ++j)
    if (static_cast<int>(j) != label_col) out.feature_names.push_back(names[j]);
  if (is_text) {
    out.x = Array::strings(Shape{rows}, std::move(texts));
  } else {
    if (text_col < cols) {  // the lone column was numeric after all: parse every cell
      x.clear();
      for (const std::string& t : texts) {
        double v = 0;
        parse_number(t, &v);
        x.push_back(static_cast<float>(v));
      }
    }
    out.x = Array::zeros(DType::kF32, Shape{rows, static_cast<int64_t>(cols - 1)});
    if (!x.empty()) std::memcpy(out.x.mutable_data(), x.data(), x.size() * sizeof(float));
  }

  bool integral = true;
  for (double v : y)
    integral = integral && std::isfinite(v) && v == std::floor(v) &&
               v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  out.y = Array::zeros(integral ? DType::kI32 : DType::kF32, Shape{rows});
  for (int64_t i = 0; i < rows; ++i) {
    if (integral) {
      static_cast<int32_t*>(out.y.mutable_data())[i] = static_cast<int32_t>(y[i]);
    } else {
      static_cast<float*>(out.y.mutable_data())[i] = static_cast<float>(y[i]);
    }
  }
  return out;
}

}  // namespace nnfleet
