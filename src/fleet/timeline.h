// timeline.jsonl in a run's output folder: when each job ran and when idle workers computed
// pieces of another model's batches, per rank, host and core, for the report's per-core timeline
// (src/report). One JSON object per line, each appended whole with one write:
//   {"kind":"session","session":1,"start":T,"ranks":[{"rank":0,"host":"h","cores":[0,1]}]}
//   {"kind":"start","session":1,"model":"m1","rank":0,"host":"h","worker":0,"core":0,"t":T}
//   {"kind":"job","session":1,"model":"m1",...,"start":T,"end":T,"status":"done"}
//   {"kind":"help","session":1,"model":"m2",...,"start":T,"end":T,"pieces":40}
//   {"kind":"lane","session":1,"rank":0,"host":"h","worker":0,"core":0,"jobs":N,"busy":S,
//    "first":T,"last":T}   (a fleet too large for per-job lines: set_lanes_only)
//   {"kind":"end","session":1,"t":T}
// Times are Unix seconds (wall clock, so that the sessions of a resumed run follow each other).
// Each --resume appends a new session; a line torn by a crash is cut off before that. A job whose
// "start" has no "job" line in its session was still running when its session ended (or died).
// Losing a line costs only part of the picture: writes never fail the run.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.h"
#include "platform/files.h"

namespace nnfleet {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // Where a job or a piece ran.
  struct Slot {
    int rank = 0;
    std::string host;
    int worker = 0;  // the worker's index on its rank
    int core = -1;
  };

  // Opens <dir>/timeline.jsonl for appending (creating it; a torn last line is cut off) and
  // appends a session record listing `ranks` ([{"rank", "host", "cores"}]). Never throws: a
  // timeline that cannot be written is left out.
  Timeline(const std::string& dir, const Json& ranks);
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Each appends one line; thread-safe. job_ended() takes the start job_started() recorded.
  void job_started(const std::string& model, const Slot& at, double t);
  void job_ended(const std::string& model, const Slot& at, double end, const std::string& status);
  void helped(const std::string& model, const Slot& at, double start, double end, int pieces);
  void end_session();

  // Wall-clock Unix seconds now, and of a steady-clock time point.
  static double now();
  double wall(Clock::time_point t) const;

  int session() const { return session_; }
  // A large fleet's timeline (Display::brief()): job_started() only remembers the start, which
  // the "job" line carries; no "start" line (120 bytes a model), so a job running when the
  // report looks (or when a crash came) has no bar.
  void set_brief(bool brief) { brief_ = brief; }
  // A fleet above fleet_detail::large_fleet_above() models: no line per job or help (15 MB of
  // the 185 MB 100,000 tiny models wrote); end_session() writes one "lane" line per worker
  // instead: its jobs, busy seconds, and first start and last end in the session.
  void set_lanes_only(bool lanes_only) { lanes_only_ = lanes_only; }

 private:
  void append(Json line);
  void append_text(const std::string& text);  // one whole line, '\n' included

  std::mutex mu_;
  AppendFile file_;
  std::map<std::string, double> started_;  // (mu_) running jobs' starts, by model
  int session_ = 1;
  bool brief_ = false;
  bool lanes_only_ = false;
  struct Lane {
    Slot at;
    size_t jobs = 0;
    double busy = 0.0, first = 0.0, last = 0.0;
  };
  std::map<std::pair<int, int>, Lane> lanes_;  // (mu_) by (rank, worker), lanes_only_ only
  double wall_minus_steady_ = 0.0;             // seconds
};

}  // namespace nnfleet
