// CSV tables: a header row naming the columns, then one sample per line, every cell a number,
// except in a file with one feature column, whose column is text when any of its cells is
// double-quoted (an SMS spam table: label,"text").
//
// Deliberately small: comma separated, cells trimmed of blanks, double-quoted cells (a comma
// inside, "" for a quote; one line each; a quoted number is a number, as in pandas), "\r\n" line
// ends and a UTF-8 byte-order mark accepted, blank lines skipped. Errors name the 1-based line
// number and the column.
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

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + printable(n) + "'";
  return s;
}

// The lines of a file, numbered from 1 (blank lines count).
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {
    if (rest_.substr(0, 3) == "\xEF\xBB\xBF") rest_.remove_prefix(3);  // UTF-8 byte-order mark
  }
  bool next(std::string_view* line) {
    if (rest_.empty()) return false;
    const size_t nl = rest_.find('\n');
    *line = rest_.substr(0, nl);
    rest_.remove_prefix(nl == std::string_view::npos ? rest_.size() : nl + 1);
    ++number_;
    return true;
  }
  int64_t number() const { return number_; }

 private:
  std::string_view rest_;
  int64_t number_ = 0;
};

// The header's column names (a name may be wrapped in double quotes).
std::vector<std::string> read_header(const std::string& path, const std::string& text,
                                     Lines& lines) {
  std::string_view line;
  bool have_header = false;
  while (lines.next(&line))
    if (!blank(line)) {
      have_header = true;
      break;
    }
  if (!have_header)
    throw_data_error(path, "file is empty; expected a header row, got " +
                               (text.empty() ? std::string("0 bytes")
                                             : std::to_string(lines.number()) + " blank lines"));
  std::vector<std::string_view> cells;
  split(line, &cells);
  std::vector<std::string> names;
  for (std::string_view c : cells) {
    if (c.size() >= 2 && c.front() == '"' && c.back() == '"') c = c.substr(1, c.size() - 2);
    names.emplace_back(c);
  }
  return names;
}

// The index of the one column named `label`.
size_t label_column(const std::string& path, const std::vector<std::string>& names,
                    const std::string& label) {
  int label_col = -1;
  for (size_t j = 0; j < names.size(); ++j) {
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
  return static_cast<size_t>(label_col);
}

// The data rows as read: numbers of the numeric columns, and the cells of the one column that
// may hold text (a file with a single feature column) kept as written until the whole column
// is seen: it is text when any of its cells is quoted, else every cell must be a number.
struct Rows {
  std::vector<float> x;
  std::vector<double> y;
  std::vector<std::string> texts;
  bool any_quoted = false;
  int64_t bad_line = 0;  // the first line whose text-column cell is not a number (0: none)
  std::string bad_cell;
};

std::string non_numeric(const std::string& at, size_t col, const std::string& name,
                        std::string_view cell) {
  return "non-numeric cell at " + at + ", column " + std::to_string(col + 1) + " ('" +
         printable(name) + "'); expected a number, got '" + printable(cell) + "'";
}

[[noreturn]] void throw_non_numeric(const std::string& path, int64_t line, size_t col,
                                    const std::string& name, std::string_view cell,
                                    const std::string& hint) {
  throw_data_error(path, non_numeric("line " + std::to_string(line), col, name, cell) + hint);
}

Rows read_rows(const std::string& path, Lines& lines, const std::vector<std::string>& names,
               size_t label_col) {
  const size_t cols = names.size();
  const size_t text_col = cols == 2 ? 1 - label_col : cols;
  Rows r;
  // The earliest problem is the one reported: a number-less cell of the lone column that no
  // quote has made text yet comes before any later line's.
  auto fail = [&](const std::string& rule) {
    if (!r.any_quoted && r.bad_line > 0)
      throw_non_numeric(path, r.bad_line, text_col, names[text_col], r.bad_cell,
                        "\nhint: quote the cells of a text column (\"like this\") to read it as "
                        "strings");
    throw_data_error(path, rule);
  };
  std::vector<std::string> row;
  std::vector<bool> quoted;
  std::string_view line;
  while (lines.next(&line)) {
    if (blank(line)) continue;
    const std::string at = "line " + std::to_string(lines.number());
    if (!split_quoted(line, &row, &quoted))
      fail("unbalanced double quote at " + at +
           "; expected a quoted cell to end on its line, before a comma");
    if (row.size() != cols)
      fail("ragged row at " + at + "; expected " + std::to_string(cols) + " cells, got " +
           std::to_string(row.size()));
    for (size_t j = 0; j < cols; ++j) {
      double v = 0;
      const bool number = parse_number(row[j], &v);
      if (j == text_col) {
        r.any_quoted = r.any_quoted || quoted[j];
        if (!number && r.bad_line == 0) {
          r.bad_line = lines.number();
          r.bad_cell = row[j];
        }
        r.texts.push_back(std::move(row[j]));
      } else if (!number) {
        fail(non_numeric(at, j, names[j], row[j]));
      } else if (j == label_col) {
        r.y.push_back(v);
      } else {
        r.x.push_back(static_cast<float>(v));
      }
    }
  }
  if (r.y.empty()) fail("no data rows; expected at least 1 row after the header, got 0");
  if (!r.any_quoted && r.bad_line > 0) fail("");
  return r;
}

// The features: the text column as strings, or the numbers [rows, cols - 1].
Array feature_array(Rows& r, size_t cols) {
  const auto rows = static_cast<int64_t>(r.y.size());
  if (r.any_quoted) return Array::strings(Shape{rows}, std::move(r.texts));
  for (const std::string& t : r.texts) {  // a lone column of numbers
    double v = 0;
    parse_number(t, &v);
    r.x.push_back(static_cast<float>(v));
  }
  Array x = Array::zeros(DType::kF32, Shape{rows, static_cast<int64_t>(cols - 1)});
  if (!r.x.empty()) std::memcpy(x.mutable_data(), r.x.data(), r.x.size() * sizeof(float));
  return x;
}

// The labels: int32 when every one is an integer in int32's range, else float32.
Array label_array(const std::vector<double>& y) {
  bool integral = true;
  for (double v : y)
    integral = integral && std::isfinite(v) && v == std::floor(v) &&
               v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  const auto rows = static_cast<int64_t>(y.size());
  Array out = Array::zeros(integral ? DType::kI32 : DType::kF32, Shape{rows});
  for (int64_t i = 0; i < rows; ++i) {
    if (integral) {
      static_cast<int32_t*>(out.mutable_data())[i] = static_cast<int32_t>(y[i]);
    } else {
      static_cast<float*>(out.mutable_data())[i] = static_cast<float>(y[i]);
    }
  }
  return out;
}

}  // namespace

CsvData load_csv(const std::string& path, const std::string& label) {
  const std::string text = read_data_file(path);
  Lines lines(text);
  const std::vector<std::string> names = read_header(path, text, lines);
  const size_t label_col = label_column(path, names, label);
  Rows rows = read_rows(path, lines, names, label_col);
  CsvData out;
  for (size_t j = 0; j < names.size(); ++j)
    if (j != label_col) out.feature_names.push_back(names[j]);
  out.x = feature_array(rows, names.size());
  out.y = label_array(rows.y);
  return out;
}

}  // namespace nnfleet
