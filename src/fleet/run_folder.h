// The output folder of a run (README.md, "What you get"), internal to src/fleet.
//
// A fresh run's folder appears whole or not at all: it is built under <dir>.tmp.<pid> and renamed
// (a run that loses a race for the same name removes its temporary). While a run uses the
// folder it holds an exclusive lock on <dir>/lock, so a second run on it fails at once.
//
// run.json records what the run began with: the plan's hash (plan.yaml holds its text) and the
// size and XXH3 hash of every data file; --resume refuses a changed plan or data file, naming the
// first difference.
//
// jobs.log holds one record per finished model, each appended whole with one write:
//   <length of the JSON> <XXH3 of the JSON, 16 hex digits> <JSON>\n
// The JSON is job_result_json_text() (history included, compact: results.h) plus the saved
// model's file and its hash; records of the full form older runs wrote are read the same.
// A record counts only when its length and hash match (a record torn by a crash is dropped) and,
// on --resume, when its model file is still there with that hash. So nothing per model needs an
// fsync (a power loss costs at most the retraining of models whose files had not reached the
// disk); the run fsyncs jobs.log once, at its end.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "fleet/fit/job_types.h"
#include "fleet/fleet_data.h"
#include "plan/plan.h"
#include "platform/files.h"

namespace nnfleet::fleet_detail {

// One file of a plan's data, as run.json records it.
struct DataFile {
  std::string role;  // "train x", "test", "train images", ...
  std::string path;
  uint64_t bytes = 0, xxh3 = 0;
};
// Every file of a plan's data sources, hashed; a source's arrays ({array: KEY}) are taken from
// `arrays` (FleetOptions::arrays) and recorded with the path "{array: KEY}". Throws FileError,
// DataError.
std::vector<DataFile> hash_data_files(const DataSpec& spec, const GivenArrays* arrays = nullptr);
// Every file of every source of a plan (Plan::sources), each file once, in the order first used.
std::vector<DataFile> hash_data_files(const Plan& plan, const GivenArrays* arrays = nullptr);

// Where two plan.yaml texts first differ: "line 12 was `  units: 8`, the plan now has `...`".
std::string first_difference(const std::string& was, const std::string& now);

// Throws FileError when the file system holding `dir` (or, before it exists, its nearest existing
// parent) has less than `bytes` free; `what` says what they are for.
void check_room(const std::string& dir, uint64_t bytes, const std::string& what);

// A test hook (null outside tests): RunFolder::create calls it with true once its temporary
// folder is complete, just before the rename that makes it the output folder, or with false when
// creation failed before that; tests hold runs there to start two into one folder at once.
extern void (*g_folder_hook)(bool ready);

class RunFolder {
 public:
  // A fresh run (resume = false): creates the folder with plan.yaml, run.json, jobs.log and its
  // sub-folders, locked; UsageError when it exists. --resume: locks the folder (UsageError when
  // another run holds it), checks the plan and the data against run.json (UsageError naming the
  // first difference), removes a killed run's temporaries and reads the records. The plan's
  // arrays are hashed from `arrays` (hash_data_files). Throws UsageError, FileError, DataError.
  RunFolder(const Plan& plan, const std::string& dir, bool resume,
            const GivenArrays* arrays = nullptr);
  // The same with the plan's plan_to_yaml() text made already.
  RunFolder(const Plan& plan, const std::string& dir, bool resume, const std::string& plan_yaml,
            const GivenArrays* arrays = nullptr);
  const std::string& dir() const { return dir_; }

  // --resume: the record of model `index` (plan order), when it has one whose model file is
  // intact (with its per-epoch history when `keep_history`); otherwise nullopt, with `why` saying
  // why a record was not trusted (empty: none). `file_optional` (save: best N): a record whose
  // model file is gone counts, without the file (the run deleted it when N better ones were
  // recorded); a file that is there must still be intact.
  std::optional<JobResult> finished(size_t index, const std::string& name, std::string& why,
                                    bool keep_history = false, bool file_optional = false);
  // Checks that the folder can be written (a probe file in each sub-folder) and that about
  // `bytes` more fit. Throws FileError.
  void check_writable(uint64_t bytes) const;
  // A finished model's record, made apart from append() so that workers make theirs at once
  // and only append under a lock; `model_file` is relative to the folder ("": none saved),
  // `model_xxh3` the hash of its bytes as written (hash_bytes).
  struct Record {
    std::string line;  // framed, with its '\n'
    size_t json_bytes = 0;
  };
  static Record record(const ModelResult& r, JobFlags flags, const std::string& model_file,
                       uint64_t model_xxh3);
  // Appends `rec` as the record of finished model `index`, whose result `r` is. Throws FileError
  // (the record is then absent, never torn). Not thread-safe.
  void append(size_t index, const ModelResult& r, const Record& rec);
  // history.csv: one row per epoch of every recorded model, in plan order, read back from
  // jobs.log. `parts` (history_part's texts, in order) when they are made already. Throws
  // FileError.
  void write_history(std::vector<std::string> parts = {});
  // The rows of part `part` of `parts` (the records in plan order cut into that many runs), read
  // back from jobs.log: parts may be made on several threads at once (parsing the records is
  // 1.6 s of a 100,000-model run's end on one thread).
  std::string history_part(size_t part, size_t parts) const;
  // jobs.log and the folder's entries to disk, once, at the run's end: its models' files are
  // left to the kernel's writeback, and one a power loss took is trained again by --resume
  // (its record's hash no longer matches). Flushing every file instead (syncfs) kept a run of
  // 8,000 tiny models, 215 MB of model files, waiting 0.55-0.60 s at its end (Zen 3, ext4).
  // Throws FileError.
  void sync();

 private:
  struct Span {
    uint64_t offset = 0, length = 0;  // the JSON of a record in jobs.log; length 0: none
  };
  void create(const std::string& plan_yaml, const Json& manifest);
  void check_resume(const std::string& plan_yaml, const Json& manifest);
  void read_records();
  std::string record_text(Span s) const;
  std::string record_text(std::ifstream& log, Span s) const;  // through jobs.log opened as `log`
  void add_columns(const ModelResult& r);

  std::string dir_;
  FileLock lock_;
  AppendFile log_;
  uint64_t log_size_ = 0;
  std::vector<std::pair<std::string, Span>> resumed_;  // by name (sorted), --resume only
  std::vector<Span> records_;                          // by plan index
  std::vector<std::string> columns_;                   // history.csv's metric columns
};

}  // namespace nnfleet::fleet_detail
