// The report page: the data as inline JSON, uPlot and the page's script and styles inlined; and
// the writer that keeps a live run's page fresh.
#include <chrono>
#include <cstdio>
#include <set>

#include "platform/files.h"
#include "report/report.h"
#include "report/report_assets.h"

namespace nnfleet {
namespace {

// Seconds between the reloads of a live page.
constexpr int kReloadSeconds = 5;

// JSON that can sit inside a <script> element whatever its strings hold. The HTML parser reads a
// script element's text through states of its own: "</script" ends it, and "<!--" followed by
// "<script" puts it in a "double escaped" state in which the next "</script>" no longer ends it
// (a layer named "<!--<script>" emptied the whole page). So no '<' at all is written: '<', '>'
// and '&' become \u003c, \u003e and \u0026 (the same strings to JSON), as do U+2028 and U+2029
// (line terminators to older JavaScript parsers). '<', '>' and '&' occur in JSON text only
// inside strings, where an escape means the same character.
std::string script_safe_json(const Json& data) {
  const std::string s = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size() + 64);
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xe2' && i + 2 < s.size() && s[i + 1] == '\x80' &&
               (s[i + 2] == '\xa8' || s[i + 2] == '\xa9')) {
      out += s[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// The fields each row of `objects` is packed by (kPackedNested) besides its own keys.
const char* const kPackedNested[] = {"history", "metrics", "grid"};

// The keys of `objects` (objects; others are skipped) in first-seen order.
Json keys_of(const Json& objects) {
  Json keys = Json::array();
  std::set<std::string> seen;
  for (const auto& o : objects)
    if (o.is_object())
      for (auto it = o.begin(); it != o.end(); ++it)
        if (seen.insert(it.key()).second) keys.push_back(it.key());
  return keys;
}

// `o` as a row of `keys`: its values in their order, and when it lacks some keys a last element
// {"absent": [index, ...]} (null stays a value, so the row reads back exactly).
Json row_of(const Json& o, const Json& keys) {
  Json row = Json::array(), absent = Json::array();
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& k = keys[i].get_ref<const std::string&>();
    if (o.contains(k)) {
      row.push_back(o[k]);
    } else {
      row.push_back(nullptr);
      absent.push_back(i);
    }
  }
  if (!absent.empty()) row.push_back({{"absent", absent}});
  return row;
}

// An object again from row_of's row.
Json object_of(const Json& row, const Json& keys) {
  std::set<size_t> absent;
  if (row.size() > keys.size())
    for (const auto& i : row.back()["absent"]) absent.insert(i.get<size_t>());
  Json o = Json::object();
  for (size_t i = 0; i < keys.size(); ++i)
    if (!absent.count(i)) o[keys[i].get<std::string>()] = row[i];
  return o;
}

}  // namespace

Json page_data(const Json& data) {
  if (!data.contains("models") || !data["models"].is_array()) return data;
  Json page = data;
  Json nested = Json::object();
  for (const char* field : kPackedNested) {
    Json values = Json::array();
    for (const auto& m : data["models"])
      if (m.contains(field)) values.push_back(m[field]);
    nested[field] = keys_of(values);
  }
  const Json keys = keys_of(data["models"]);
  Json rows = Json::array();
  for (Json m : data["models"]) {
    for (const char* field : kPackedNested)
      if (m.contains(field) && m[field].is_object()) m[field] = row_of(m[field], nested[field]);
    rows.push_back(row_of(m, keys));
  }
  page["models"] = {{"keys", keys}, {"nested", nested}, {"rows", rows}};
  return page;
}

Json data_of_page(const Json& page) {
  if (!page.contains("models") || !page["models"].is_object()) return page;
  const Json& packed = page["models"];
  Json data = page;
  data["models"] = Json::array();
  for (const auto& row : packed["rows"]) {
    Json m = object_of(row, packed["keys"]);
    for (const auto& [field, keys] : packed["nested"].items())
      if (m.contains(field) && m[field].is_array()) m[field] = object_of(m[field], keys);
    data["models"].push_back(std::move(m));
  }
  return data;
}

std::string report_html(const Json& data) {
  const bool live = data.value("live", false);
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  if (live)
    h += "<meta http-equiv=\"refresh\" content=\"" + std::to_string(kReloadSeconds) + "\">\n";
  h += "<title>" + html_escape(data.value("title", std::string("nnfleet report"))) + "</title>\n";
  h += "<style>\n";
  h += report_assets::kUplotCss;
  h += "\n";
  h += report_assets::kReportCss;
  h += "\n</style>\n</head>\n<body>\n<div id=\"app\"></div>\n";
  h += "<script type=\"application/json\" id=\"report-data\">" + script_safe_json(page_data(data)) +
       "</script>\n<script>\n";
  h += report_assets::kUplotJs;
  h += "\n</script>\n<script>\n";
  h += report_assets::kFormatJs;  // nnfleetFormat, used by report.js (one element: the page has
                                  // three)
  h += "\n";
  h += report_assets::kReportJs;
  h += "\n</script>\n</body>\n</html>\n";
  return h;
}

std::string write_report(const std::string& run_dir, bool live, ModelFileCache* cache,
                         const std::string& group_by) {
  const std::string path = run_dir + "/report.html";
  write_file_atomic(path, report_html(collect_report(run_dir, live, cache, group_by)),
                    Durability::kProcessCrash);
  return path;
}

LiveReport::~LiveReport() { finish(false); }

void LiveReport::start(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  dir_ = dir;
  thread_ = std::thread([this] { loop(); });
}

void LiveReport::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    try {
      write_report(dir_, true, &cache_);
    } catch (const std::exception&) {
      // The next rewrite (or the last one, which reports its error) tries again.
    }
    lock.lock();
    cv_.wait_for(lock, std::chrono::duration<double>(seconds_), [this] { return stopping_; });
  }
}

std::string LiveReport::finish(bool final_write) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!final_write || dir_.empty()) return "";
  return write_report(dir_, false, &cache_);
}

}  // namespace nnfleet
