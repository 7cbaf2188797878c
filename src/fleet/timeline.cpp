// timeline.jsonl: appended line by line under a mutex; see timeline.h.
#include "fleet/timeline.h"

#include <algorithm>
#include <fstream>

namespace nnfleet {
namespace {

double seconds_of(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// Milliseconds are all a timeline needs; fewer digits keep the file small.
double ms(double t) { return static_cast<double>(static_cast<int64_t>(t * 1000.0 + 0.5)) / 1000.0; }

Json slot_json(const std::string& kind, int session, const std::string& model,
               const Timeline::Slot& at) {
  return {{"kind", kind},    {"session", session},  {"model", model}, {"rank", at.rank},
          {"host", at.host}, {"worker", at.worker}, {"core", at.core}};
}

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

void Timeline::append(Json line) {
  const std::string text = line.dump() + "\n";
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
  Json j = slot_json("start", session_, model, at);
  j["t"] = ms(t);
  append(std::move(j));
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
  Json j = slot_json("job", session_, model, at);
  j["start"] = ms(start);
  j["end"] = ms(end);
  j["status"] = status;
  append(std::move(j));
}

void Timeline::helped(const std::string& model, const Slot& at, double start, double end,
                      int pieces) {
  Json j = slot_json("help", session_, model, at);
  j["start"] = ms(start);
  j["end"] = ms(end);
  j["pieces"] = pieces;
  append(std::move(j));
}

void Timeline::end_session() { append({{"kind", "end"}, {"session", session_}, {"t", ms(now())}}); }

}  // namespace nnfleet
