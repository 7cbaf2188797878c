// timeline.jsonl: appended line by line under a mutex; see timeline.h.
#include "fleet/timeline.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

namespace nnfleet {
namespace {

double seconds_of(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// Milliseconds are all a timeline needs; fewer digits keep the file small.
double ms(double t) { return static_cast<double>(static_cast<int64_t>(t * 1000.0 + 0.5)) / 1000.0; }

// A job's line as text, with the keys in the sorted order Json dumps them in (the same bytes):
// making and dumping a Json object for each of a job's two lines was 4% of the CPU of a run of
// 8,000 tiny models. `fields` are the line's own keys with their values' text.
std::string slot_line(const char* kind, int session, const std::string& model,
                      const Timeline::Slot& at,
                      std::vector<std::pair<const char*, std::string>> fields) {
  fields.emplace_back("core", std::to_string(at.core));
  fields.emplace_back("host", Json(at.host).dump());
  fields.emplace_back("kind", Json(kind).dump());
  if (!model.empty()) fields.emplace_back("model", Json(model).dump());
  fields.emplace_back("rank", std::to_string(at.rank));
  fields.emplace_back("session", std::to_string(session));
  fields.emplace_back("worker", std::to_string(at.worker));
  std::sort(fields.begin(), fields.end(),
            [](const auto& a, const auto& b) { return std::strcmp(a.first, b.first) < 0; });
  std::string t = "{";
  for (const auto& [key, value] : fields) {
    if (t.size() > 1) t += ',';
    t += '"';
    t += key;
    t += "\":";
    t += value;
  }
  return t + "}\n";
}

std::string number(double v) { return Json(v).dump(); }

}  // namespace

double Timeline::now() { return seconds_of(std::chrono::system_clock::now()); }

double Timeline::wall(Clock::time_point t) const {
  return std::chrono::duration<double>(t.time_since_epoch()).count() + wall_minus_steady_;
}

Timeline::Timeline(const std::string& dir, const Json& ranks) {
  wall_minus_steady_ =
      now() - std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  const std::string path = dir + "/timeline.jsonl";
  // Keep every whole line of an earlier session; the session number follows the last one seen.
  uint64_t keep = 0, at = 0;
  {
    std::ifstream f(path, std::ios::binary);
    std::string line;
    while (f && std::getline(f, line)) {
      at += line.size() + 1;
      if (f.eof()) break;  // no '\n': torn
      keep = at;
      try {
        const Json j = Json::parse(line);
        if (j.value("kind", "") == "session")
          session_ = std::max(session_, j.value("session", 0) + 1);
      } catch (const Json::exception&) {
      }
    }
  }
  try {
    file_ = AppendFile(path, keep);
  } catch (const Error&) {
    return;  // the run goes on without a timeline
  }
  append({{"kind", "session"}, {"session", session_}, {"start", ms(now())}, {"ranks", ranks}});
}

void Timeline::append(Json line) { append_text(line.dump() + "\n"); }

void Timeline::append_text(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_.is_open()) return;
  try {
    file_.append(text);
  } catch (const Error&) {
    // A full disk: the run reports it through its own writes; the picture just lacks this line.
  }
}

void Timeline::job_started(const std::string& model, const Slot& at, double t) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_[model] = t;
  }
  if (brief_ || lanes_only_) return;
  append_text(slot_line("start", session_, model, at, {{"t", number(ms(t))}}));
}

void Timeline::job_ended(const std::string& model, const Slot& at, double end,
                         const std::string& status) {
  double start = end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = started_.find(model); it != started_.end()) {
      start = it->second;
      started_.erase(it);
    }
  }
  if (lanes_only_) {
    std::lock_guard<std::mutex> lock(mu_);
    Lane& l = lanes_[{at.rank, at.worker}];
    if (l.jobs++ == 0) {
      l.at = at;
      l.first = start;
    }
    l.first = std::min(l.first, start);
    l.last = std::max(l.last, end);
    l.busy += end - start;
    return;
  }
  append_text(slot_line(
      "job", session_, model, at,
      {{"start", number(ms(start))}, {"end", number(ms(end))}, {"status", Json(status).dump()}}));
}

void Timeline::helped(const std::string& model, const Slot& at, double start, double end,
                      int pieces) {
  if (lanes_only_) return;
  append_text(slot_line("help", session_, model, at,
                        {{"start", number(ms(start))},
                         {"end", number(ms(end))},
                         {"pieces", std::to_string(pieces)}}));
}

void Timeline::end_session() {
  std::map<std::pair<int, int>, Lane> lanes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lanes.swap(lanes_);
  }
  for (const auto& [key, l] : lanes)
    append_text(slot_line("lane", session_, "", l.at,
                          {{"jobs", std::to_string(l.jobs)},
                           {"busy", number(ms(l.busy))},
                           {"first", number(ms(l.first))},
                           {"last", number(ms(l.last))}}));
  append({{"kind", "end"}, {"session", session_}, {"t", ms(now())}});
}

}  // namespace nnfleet
