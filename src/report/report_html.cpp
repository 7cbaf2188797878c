// The report page: the data as inline JSON, uPlot and the page's script and styles inlined; and
// the writer that keeps a live run's page fresh.
#include <chrono>
#include <cstdio>

#include "platform/files.h"
#include "report/report.h"
#include "report/report_assets.h"

namespace nnfleet {
namespace {

// Seconds between the reloads of a live page.
constexpr int kReloadSeconds = 5;

// JSON that can sit inside a <script> element: "</" would end it, so it is written "<\/"
// (the same string to JSON).
std::string script_safe_json(const Json& data) {
  const std::string s = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size() + 64);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else {
      out += s[i];
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

}  // namespace

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
  h += "<script type=\"application/json\" id=\"report-data\">" + script_safe_json(data) +
       "</script>\n<script>\n";
  h += report_assets::kUplotJs;
  h += "\n</script>\n<script>\n";
  h += report_assets::kReportJs;
  h += "\n</script>\n</body>\n</html>\n";
  return h;
}

std::string write_report(const std::string& run_dir, bool live, ModelFileCache* cache) {
  const std::string path = run_dir + "/report.html";
  write_file_atomic(path, report_html(collect_report(run_dir, live, cache)),
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
