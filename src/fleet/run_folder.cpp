// The output folder of a run: creation, lock, manifest checks, the records of finished models.
#include "fleet/run_folder.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "data/dataset.h"
#include "fleet/fleet.h"
#include "fleet/fleet_data.h"
#include "fleet/results.h"

namespace nnfleet::fleet_detail {
// The JSON of a record line (without its '\n'), or nullopt when the framing does not hold.
std::optional<std::string_view> unframe(std::string_view line);

namespace {

constexpr const char* kFormat = "nnfleet-run 1";

std::string mb(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return b;
}

void add_source(const DataSource& s, const GivenArrays* arrays, const std::string& part,
                std::vector<DataFile>& out) {
  const bool given = s.kind == DataSource::Kind::kArrays;
  auto add = [&](const std::string& role, const std::string& name) {
    DataFile f;
    f.role = role;
    f.path = given ? "{array: " + name + "}" : name;
    if (given) {
      const Array& a = given_array(arrays, name);
      f.bytes = a.size_bytes();
      // The shape and dtype count too: the same bytes read as another array are other data.
      f.xxh3 = hash_bytes(std::string_view(static_cast<const char*>(a.data()), a.size_bytes())) ^
               hash_bytes(a.shape().str() + dtype_name(a.dtype()));
    } else {
      f.xxh3 = hash_file(name, &f.bytes);
    }
    out.push_back(f);
  };
  switch (s.kind) {
    case DataSource::Kind::kFashionMnist: {
      const auto files = fashion_mnist_files(s.split);
      add(part + " images", files[0]);
      add(part + " labels", files[1]);
      break;
    }
    case DataSource::Kind::kNpy:
    case DataSource::Kind::kArrays:
    case DataSource::Kind::kIdx:
      add(part + " x", s.x);
      add(part + " y", s.y);
      // Further inputs and targets of a model with several (npy sources and arrays only: an npz
      // is one file).
      if (s.kind != DataSource::Kind::kIdx) {
        for (size_t i = 0; i < s.more_x.size(); ++i)
          add(part + " x" + std::to_string(i + 1), s.more_x[i]);
        for (size_t i = 0; i < s.more_y.size(); ++i)
          add(part + " y" + std::to_string(i + 1), s.more_y[i]);
      }
      break;
    case DataSource::Kind::kNpz:
    case DataSource::Kind::kCsv:
      add(part, s.file);
      break;
  }
}

Json manifest_of(const std::string& plan_yaml, const std::vector<DataFile>& files) {
  Json data = Json::array();
  for (const auto& f : files)
    data.push_back(
        {{"role", f.role}, {"path", f.path}, {"bytes", f.bytes}, {"xxh3", hex64(f.xxh3)}});
  return {{"format", kFormat}, {"plan_xxh3", hex64(hash_bytes(plan_yaml))}, {"data", data}};
}

std::string quoted_line(const std::string& text, size_t line) {
  size_t at = 0;
  for (size_t i = 1; i < line && at != std::string::npos; ++i) {
    at = text.find('\n', at);
    if (at != std::string::npos) ++at;
  }
  if (at == std::string::npos || at >= text.size()) return "nothing (the text ends before it)";
  const size_t end = text.find('\n', at);
  std::string s = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return "`" + s + "`";
}

// "<length> <hash> <json>\n"
std::string frame(const std::string& json) {
  return std::to_string(json.size()) + " " + hex64(hash_bytes(json)) + " " + json + "\n";
}

}  // namespace

std::optional<std::string_view> unframe(std::string_view line) {
  const size_t sp = line.find(' ');
  if (sp == std::string_view::npos || sp == 0 || sp > 12) return std::nullopt;
  uint64_t len = 0;
  for (size_t i = 0; i < sp; ++i) {
    if (line[i] < '0' || line[i] > '9') return std::nullopt;
    len = len * 10 + static_cast<uint64_t>(line[i] - '0');
  }
  if (line.size() != sp + 1 + 16 + 1 + len || line[sp + 17] != ' ') return std::nullopt;
  const std::string_view json = line.substr(sp + 18);
  if (line.substr(sp + 1, 16) != hex64(hash_bytes(json))) return std::nullopt;
  return json;
}

std::vector<DataFile> hash_data_files(const DataSpec& spec, const GivenArrays* arrays) {
  std::vector<DataFile> files;
  add_source(spec.train, arrays, "train", files);
  if (spec.test) add_source(*spec.test, arrays, "test", files);
  if (spec.validation) add_source(*spec.validation, arrays, "validation", files);
  return files;
}

std::vector<DataFile> hash_data_files(const Plan& plan, const GivenArrays* arrays) {
  std::vector<DataFile> files;
  for (const DataSpec& spec : plan.sources)
    for (DataFile& f : hash_data_files(spec, arrays)) {
      const bool seen = std::any_of(files.begin(), files.end(),
                                    [&](const DataFile& g) { return g.path == f.path; });
      if (!seen) files.push_back(std::move(f));
    }
  return files;
}

std::string first_difference(const std::string& was, const std::string& now) {
  size_t line = 1, i = 0;
  for (; i < was.size() && i < now.size() && was[i] == now[i]; ++i)
    if (was[i] == '\n') ++line;
  return "line " + std::to_string(line) + " of its plan.yaml was " + quoted_line(was, line) +
         ", the plan now gives " + quoted_line(now, line);
}

void check_room(const std::string& dir, uint64_t bytes, const std::string& what) {
  std::filesystem::path p = std::filesystem::absolute(dir);
  while (!file_exists(p.string()) && p.has_parent_path() && p != p.parent_path())
    p = p.parent_path();
  const uint64_t free = free_bytes(p.string());
  if (free < bytes)
    throw FileError("failed to start the run in '" + dir + "': not enough free space for " + what +
                    "; expected about " + mb(bytes) + ", got " + mb(free) +
                    " free on the file "
                    "system of '" +
                    p.string() +
                    "'\nhint: free some space or choose another "
                    "--out (an interrupted run continues with --resume)");
}

RunFolder::RunFolder(const Plan& plan, const std::string& dir, bool resume,
                     const GivenArrays* arrays)
    : RunFolder(plan, dir, resume, plan_to_yaml(plan, 1, plan.models.size() > large_fleet_above()),
                arrays) {}

RunFolder::RunFolder(const Plan& plan, const std::string& dir, bool resume,
                     const std::string& plan_yaml, const GivenArrays* arrays)
    : dir_(dir) {
  records_.resize(plan.models.size());
  const Json manifest = manifest_of(plan_yaml, hash_data_files(plan, arrays));
  if (resume)
    check_resume(plan_yaml, manifest);
  else
    create(plan_yaml, manifest);
}

void (*g_folder_hook)(bool ready) = nullptr;

void RunFolder::create(const std::string& plan_yaml, const Json& manifest) {
  // The folder appears whole (with its plan), and locked, or not at all. It is built under a
  // name of this run's own (the process id and a per-process count: two threads of one process
  // may start runs into the same folder at once), so only the rename can find another run's (or
  // the user's) folder in the way: then the temporary goes, and nothing else was touched.
  static std::atomic<uint64_t> runs{0};
  const std::string tmp = dir_ + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(runs.fetch_add(1, std::memory_order_relaxed));
  bool hooked = false;
  try {
    std::filesystem::remove_all(tmp);
    for (const char* sub : {"", "/models", "/checkpoints"}) make_dirs(tmp + sub);
    NNFLEET_CHECK(lock_.try_lock(tmp + "/lock"));
    write_file_atomic(tmp + "/plan.yaml", plan_yaml);
    write_file_atomic(tmp + "/run.json", manifest.dump(1) + "\n");
    log_ = AppendFile(tmp + "/jobs.log", 0);
    hooked = true;
    if (g_folder_hook) g_folder_hook(true);
    // rename(2) replaces an empty folder only: one with files in it is someone else's.
    if (std::rename(tmp.c_str(), dir_.c_str()) != 0) {
      const int e = errno;
      if (e == ENOTEMPTY || e == EEXIST || e == ENOTDIR || e == EISDIR)
        throw UsageError("failed to create output folder '" + dir_ +
                         "': it already exists; "
                         "expected a new folder, or --resume to continue the run in it");
      throw FileError("failed to create output folder '" + dir_ + "': " + std::strerror(e));
    }
  } catch (...) {
    if (!hooked && g_folder_hook) g_folder_hook(false);
    lock_ = FileLock();
    log_ = AppendFile();
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    throw;
  }
}

void RunFolder::check_resume(const std::string& plan_yaml, const Json& manifest) {
  const std::string where = "failed to resume '" + dir_ + "': ";
  if (!file_exists(dir_ + "/plan.yaml"))
    throw UsageError(where +
                     "no plan.yaml there; expected the --out folder of an earlier run of "
                     "this plan");
  long holder = 0;
  if (!lock_.try_lock(dir_ + "/lock", &holder))
    throw UsageError(where + "another nnfleet run " +
                     (holder > 0 ? "(process " + std::to_string(holder) + ") " : std::string()) +
                     "is using it; expected one run per output folder (wait for it to end, or "
                     "stop it)");
  if (!file_exists(dir_ + "/run.json") || !file_exists(dir_ + "/jobs.log"))
    throw UsageError(where +
                     "no run.json and jobs.log there (written by an older nnfleet?); "
                     "expected an output folder of this version, or a new --out");
  const std::string was = read_file(dir_ + "/plan.yaml");
  if (was != plan_yaml)
    throw UsageError(where + "the plan differs from the one that run began with: " +
                     first_difference(was, plan_yaml) + "; expected the same plan, or a new --out");
  Json old;
  try {
    old = Json::parse(read_file(dir_ + "/run.json"));
    if (old.at("format") != kFormat) throw UsageError("");
  } catch (const std::exception&) {
    throw UsageError(where + "its run.json is not one this nnfleet reads; expected format '" +
                     std::string(kFormat) + "', or a new --out");
  }
  const Json& now = manifest.at("data");
  const Json& then = old.at("data");
  for (size_t i = 0; i < now.size(); ++i) {
    const Json& n = now[i];
    auto same = [&](const Json& t) {
      return t.value("role", "") == n["role"] && t.value("path", "") == n["path"];
    };
    auto it = std::find_if(then.begin(), then.end(), same);
    if (it == then.end())
      throw UsageError(where + "its run.json has no record of data file '" +
                       n["path"].get<std::string>() + "' (" + n["role"].get<std::string>() +
                       "); expected the data the run began with, or a new --out");
    if ((*it)["bytes"] != n["bytes"] || (*it)["xxh3"] != n["xxh3"])
      throw UsageError(where + "data file '" + n["path"].get<std::string>() + "' (" +
                       n["role"].get<std::string>() + ") changed since the run began; expected " +
                       (*it)["bytes"].dump() + " bytes with XXH3 " +
                       (*it)["xxh3"].get<std::string>() + ", got " + n["bytes"].dump() +
                       " bytes with XXH3 " + n["xxh3"].get<std::string>() +
                       "; restore it, or use a new --out (a run's "
                       "models must all see the same data)");
  }
  if (old.value("plan_xxh3", "") != manifest.at("plan_xxh3"))
    throw UsageError(where +
                     "its run.json records another plan than its plan.yaml; expected a "
                     "folder written by nnfleet, or a new --out");
  // Temporaries of a killed run are never read back; remove them.
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_))
    if (e.is_regular_file() && e.path().filename().string().find(".tmp.") != std::string::npos)
      std::filesystem::remove(e.path());
  read_records();
}

void RunFolder::read_records() {
  const std::string path = dir_ + "/jobs.log";
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FileError("failed to read file '" + path + "': " + std::strerror(errno));
  std::string line;
  uint64_t at = 0, keep = 0;
  while (std::getline(f, line)) {
    const uint64_t start = at;
    at += line.size() + 1;
    if (f.eof()) break;  // no '\n': a record torn by a crash
    keep = at;
    const auto json = unframe(line);
    if (!json) continue;  // damaged: the model is trained again
    try {
      const Json j = Json::parse(*json);
      const uint64_t json_at = start + (line.size() - json->size());
      resumed_.emplace_back(j.at("name").get<std::string>(), Span{json_at, json->size()});
    } catch (const Json::exception&) {
    }
  }
  // The last record of a name wins (a model trained again after its file was found damaged).
  std::stable_sort(resumed_.begin(), resumed_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  log_ = AppendFile(path, keep);
  log_size_ = keep;
}

std::string RunFolder::record_text(Span s) const {
  std::ifstream f(dir_ + "/jobs.log", std::ios::binary);
  return record_text(f, s);
}

std::string RunFolder::record_text(std::ifstream& f, Span s) const {
  std::string json(s.length, '\0');
  f.seekg(static_cast<std::streamoff>(s.offset));
  f.read(json.data(), static_cast<std::streamsize>(s.length));
  if (static_cast<uint64_t>(f.gcount()) != s.length)
    throw FileError("failed to read file '" + dir_ + "/jobs.log': it shrank while the run read it");
  return json;
}

std::optional<JobResult> RunFolder::finished(size_t index, const std::string& name,
                                             std::string& why, bool keep_history,
                                             bool file_optional) {
  why.clear();
  auto it = std::upper_bound(resumed_.begin(), resumed_.end(), name,
                             [](const std::string& n, const auto& e) { return n < e.first; });
  if (it == resumed_.begin() || (it - 1)->first != name) return std::nullopt;
  const Span span = (it - 1)->second;
  try {
    std::string file, xxh3;
    JobResult r = job_result_from_record(record_text(span), &file, &xxh3);
    if (file_optional && !file.empty() && !file_exists(dir_ + "/" + file)) file.clear();
    if (!file.empty()) {
      const std::string path = dir_ + "/" + file;
      if (!file_exists(path) || hex64(hash_file(path)) != xxh3) {
        why = "its model file '" + path + "' is missing or incomplete";
        return std::nullopt;
      }
    }
    if (!file.empty()) r.model_file = dir_ + "/" + file;
    add_columns(r);
    if (!keep_history) {
      r.history.clear();
      r.history.shrink_to_fit();
    }
    records_.at(index) = span;
    return r;
  } catch (const std::exception& e) {
    why = std::string("its record cannot be read (") + e.what() + ")";
    return std::nullopt;
  }
}

void RunFolder::check_writable(uint64_t bytes) const {
  for (const char* sub : {"/models", "/checkpoints", ""}) {
    const std::string probe = dir_ + sub + "/.write-probe";
    try {
      write_file_atomic(probe, "nnfleet\n", Durability::kProcessCrash);
    } catch (const FileError& e) {
      throw FileError("failed to start the run in '" + dir_ + "': its folder cannot be written (" +
                      e.what() +
                      ")\nhint: free some space or fix the folder's permissions; the "
                      "run continues with --resume");
    }
    std::remove(probe.c_str());
  }
  check_room(dir_, bytes, "the models, checkpoints and records this run will write");
}

void RunFolder::add_columns(const ModelResult& r) {
  if (r.history.empty()) return;
  for (const auto& kv : r.history[0].values)
    if (std::find(columns_.begin(), columns_.end(), kv.first) == columns_.end())
      columns_.push_back(kv.first);
}

RunFolder::Record RunFolder::record(const ModelResult& r, JobFlags flags,
                                    const std::string& model_file, uint64_t model_xxh3) {
  const std::string json = result_record_text(r, flags, model_file, model_xxh3);
  return {frame(json), json.size()};
}

void RunFolder::append(size_t index, const ModelResult& r, const Record& rec) {
  log_.append(rec.line);
  records_.at(index) = Span{log_size_ + (rec.line.size() - 1 - rec.json_bytes), rec.json_bytes};
  log_size_ += rec.line.size();
  add_columns(r);
}

std::string RunFolder::history_part(size_t part, size_t parts) const {
  const size_t n = records_.size();
  const size_t from = n * part / parts, to = n * (part + 1) / parts;
  std::ostringstream o;
  // One open of jobs.log for all records: one per record was 0.14 s of the 0.9 s a run of 8,000
  // tiny models spent after its last model (Zen 3, ext4).
  std::ifstream log(dir_ + "/jobs.log", std::ios::binary);
  for (size_t k = from; k < to; ++k)
    if (records_[k].length > 0)
      history_csv_rows(o, job_result_from_record(record_text(log, records_[k])), columns_);
  return std::move(o).str();
}

void RunFolder::write_history(std::vector<std::string> parts) {
  if (parts.empty()) parts.push_back(history_part(0, 1));
  write_atomic_with(
      dir_ + "/history.csv",
      [&](const std::string& tmp) {
        std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
        o << history_csv_header(columns_);
        for (std::string& p : parts) {
          o << p;
          std::string().swap(p);
        }
        o.flush();
        if (!o)
          throw FileError("failed to write file '" + dir_ +
                          "/history.csv': " + std::strerror(errno));
      },
      Durability::kProcessCrash);
}

void RunFolder::sync() {
  log_.sync();
  sync_folder(dir_);
}

}  // namespace nnfleet::fleet_detail

namespace nnfleet {

std::vector<Json> read_job_records(const std::string& dir) {
  const std::string path = dir + "/jobs.log";
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FileError("failed to read file '" + path + "': " + std::strerror(errno));
  std::vector<Json> out;
  std::map<std::string, size_t> at;  // name -> index in out
  std::string line;
  while (std::getline(f, line)) {
    if (f.eof()) break;  // no '\n': torn, or still being written
    const auto json = fleet_detail::unframe(line);
    if (!json) continue;
    try {
      // Either form of a record, given to the report in the full one (job_result_to_json).
      std::string file, xxh3;
      const JobResult r = job_result_from_record(*json, &file, &xxh3);
      Json j = job_result_to_json(r);
      if (!file.empty()) {
        j["model_file"] = file;
        j["model_xxh3"] = xxh3;
      }
      const std::string name = r.name;
      if (auto it = at.find(name); it != at.end()) {
        out[it->second] = std::move(j);  // the last record of a name wins
      } else {
        at.emplace(name, out.size());
        out.push_back(std::move(j));
      }
    } catch (const std::exception&) {
    }
  }
  return out;
}

}  // namespace nnfleet
