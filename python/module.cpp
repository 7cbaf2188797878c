// nnfleet._core: the pybind11 binding of the public C++ API (include/nnfleet/) under the Python
// package nnfleet (python/nnfleet/__init__.py holds the Keras-like functions built on it).
//
// The engine always runs with the GIL released, on a thread of its own: the calling thread waits
// for it while delivering the run's events (to Python callbacks, on the calling thread) and
// checking for signals, so that Ctrl-C stops a run cleanly (every model checkpoints) and then
// raises KeyboardInterrupt. NumPy arrays are read in place; the engine never keeps them past the
// call.
//
// Every call that releases the GIL is counted (Calls): when the interpreter exits, the package's
// exit hooks stop every running train (as Ctrl-C does) and wait, with the GIL released, until no
// call is left inside the engine. Without that, a daemon thread still inside a call would be
// ended by the interpreter's finalization while it waits for the GIL, unwinding through
// destructors that may not throw: std::terminate.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "nnfleet/nnfleet.h"
#include "nnfleet/testing.h"
#include "nnfleet/version.h"

namespace py = pybind11;
using namespace nnfleet::api;

namespace {

// The calls inside the engine, and the stop flags of the running trains.
class Calls {
 public:
  static Calls& get() {
    static Calls* c = new Calls;  // never destroyed: threads may still hold it at exit
    return *c;
  }
  // Counts a call in (with the train's stop flag, or null); throws once the interpreter exits.
  void enter(std::atomic<bool>* stop) {
    std::lock_guard<std::mutex> g(mu_);
    if (closing_)
      throw nnfleet::UsageError(
          "failed to start the call: the Python interpreter is exiting; expected calls to "
          "nnfleet before the interpreter's exit (its running trains were stopped)");
    ++calls_;
    if (stop) stops_.push_back(stop);
  }
  void leave(std::atomic<bool>* stop) {
    std::lock_guard<std::mutex> g(mu_);
    --calls_;
    if (stop) stops_.erase(std::find(stops_.begin(), stops_.end(), stop));
    cv_.notify_all();
  }
  // Stops every running train; with `closing`, no call starts after this one.
  void stop_all(bool closing) {
    std::lock_guard<std::mutex> g(mu_);
    closing_ = closing_ || closing;
    for (std::atomic<bool>* s : stops_) *s = true;
  }
  // Waits (the GIL released) until no call is inside the engine.
  void wait_idle() {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return calls_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closing_ = false;
  int calls_ = 0;
  std::vector<std::atomic<bool>*> stops_;
};

// One call inside the engine, counted for as long as it lives (constructed with the GIL held).
class CallScope {
 public:
  explicit CallScope(std::atomic<bool>* stop = nullptr) : stop_(stop) { Calls::get().enter(stop); }
  ~CallScope() { Calls::get().leave(stop_); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  std::atomic<bool>* stop_;
};

// Strings made from NumPy unicode arrays, kept alive for as long as the call that reads them.
using KeptStrings = std::vector<std::shared_ptr<const std::vector<std::string>>>;

// A NumPy unicode array's elements ('<U<n>': n UTF-32 code points, NUL-padded) in UTF-8.
std::shared_ptr<const std::vector<std::string>> unicode_strings(const py::array& a) {
  const size_t chars = static_cast<size_t>(a.itemsize()) / 4;
  auto out = std::make_shared<std::vector<std::string>>(static_cast<size_t>(a.size()));
  const auto* base = static_cast<const char*>(a.data());
  for (size_t i = 0; i < out->size(); ++i) {
    std::string& s = (*out)[i];
    size_t len = chars;
    uint32_t c = 0;
    while (len > 0 && (std::memcpy(&c, base + (i * chars + len - 1) * 4, 4), c == 0)) --len;
    for (size_t k = 0; k < len; ++k) {
      std::memcpy(&c, base + (i * chars + k) * 4, 4);
      if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
      if (c < 0x80) {
        s += static_cast<char>(c);
      } else if (c < 0x800) {
        s += static_cast<char>(0xC0 | (c >> 6));
        s += static_cast<char>(0x80 | (c & 0x3F));
      } else if (c < 0x10000) {
        s += static_cast<char>(0xE0 | (c >> 12));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (c & 0x3F));
      } else {
        s += static_cast<char>(0xF0 | (c >> 18));
        s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (c & 0x3F));
      }
    }
  }
  return out;
}

// The view of a NumPy array that is C-contiguous and of a type the engine reads in place; the
// Python layer converts every other array before it gets here. A unicode array (text for a
// string input) is converted to strings that `keep` holds.
ArrayView view_of(const py::array& a, const std::string& what, KeptStrings* keep = nullptr) {
  if (!(a.flags() & py::array::c_style))
    throw nnfleet::DataError("failed to read " + what +
                             ": expected a C-contiguous array, got another layout");
  ArrayView v;
  const py::dtype dt = a.dtype();
  if (dt.kind() == 'U' && keep) {
    keep->push_back(unicode_strings(a));
    v.type = ElementType::kString;
    v.data =
        keep->back()->empty() ? static_cast<const void*>(keep->back().get()) : keep->back()->data();
    for (py::ssize_t d = 0; d < a.ndim(); ++d) v.shape.push_back(a.shape(d));
    return v;
  }
  if (dt.equal(py::dtype::of<uint8_t>()))
    v.type = ElementType::kUint8;
  else if (dt.equal(py::dtype::of<int32_t>()))
    v.type = ElementType::kInt32;
  else if (dt.equal(py::dtype::of<int64_t>()))
    v.type = ElementType::kInt64;
  else if (dt.equal(py::dtype::of<float>()))
    v.type = ElementType::kFloat32;
  else if (dt.equal(py::dtype::of<double>()))
    v.type = ElementType::kFloat64;
  else
    throw nnfleet::DataError("failed to read " + what + ": unsupported dtype '" +
                             dt.attr("name").cast<std::string>() +
                             "'; expected uint8, int32, int64, float32 or float64");
  v.data = a.data();
  for (py::ssize_t d = 0; d < a.ndim(); ++d) v.shape.push_back(a.shape(d));
  return v;
}

// Runs `work` on a thread of its own with the GIL released, delivering queued events to
// `deliver` (with the GIL) on this thread and polling for signals. A KeyboardInterrupt (or any
// exception a signal handler raises) sets `stop`, waits for the run to end and is raised then.
template <typename Result>
Result run_released(const std::function<Result()>& work, std::atomic<bool>& stop, std::mutex& mu,
                    std::condition_variable& cv, const std::function<bool()>& ready,
                    const std::function<void()>& deliver, const std::function<void()>& drop) {
  Result result{};
  std::exception_ptr failure;
  bool finished = false;
  std::thread t([&] {
    try {
      result = work();
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> g(mu);
    finished = true;
    cv.notify_all();
  });
  // Should anything below throw, the run is stopped and joined before its thread is destroyed.
  struct Joiner {
    std::thread& t;
    std::atomic<bool>& stop;
    ~Joiner() {
      if (!t.joinable()) return;
      stop = true;
      py::gil_scoped_release release;
      t.join();
    }
  } joiner{t, stop};
  std::optional<py::error_already_set> interrupted;
  for (;;) {
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return finished || ready(); });
    }
    try {
      // Once interrupted, the run's remaining events are dropped, not delivered.
      if (interrupted)
        drop();
      else
        deliver();
    } catch (py::error_already_set& e) {
      // A callback raised: the run stops and the error is raised once it has.
      stop = true;
      if (!interrupted) interrupted.emplace(std::move(e));
    }
    if (!interrupted && PyErr_CheckSignals() != 0) {
      stop = true;
      interrupted.emplace();
    }
    std::lock_guard<std::mutex> g(mu);
    if (finished && !ready()) break;
  }
  {
    py::gil_scoped_release release;
    t.join();
  }
  if (interrupted) throw *interrupted;
  if (failure) std::rethrow_exception(failure);
  return result;
}

py::dict logs_dict(const Logs& logs) {
  py::dict d;
  for (const auto& [k, v] : logs) d[py::str(k)] = v;
  return d;
}

// predict's and evaluate's keyword arguments.
PredictOptions predict_options(const std::string& loss, int batch_size, int workers, double scale) {
  PredictOptions o;
  o.batch_size = batch_size;
  o.workers = workers;
  o.scale = scale;
  o.loss = loss;
  return o;
}

// The views of predict's and evaluate's arrays, named "x" (or "x[k]") and "y" in `o`'s messages.
void views(const std::vector<py::array>& xs, const std::vector<py::array>& ys, PredictOptions& o,
           std::vector<ArrayView>& xv, std::vector<ArrayView>& yv, KeptStrings& keep) {
  for (size_t k = 0; k < xs.size(); ++k) {
    o.x_names.push_back(xs.size() > 1 ? "x[" + std::to_string(k) + "]" : "x");
    xv.push_back(view_of(xs[k], "'" + o.x_names.back() + "'", &keep));
  }
  for (size_t j = 0; j < ys.size(); ++j) {
    o.y_names.push_back(ys.size() > 1 ? "y[" + std::to_string(j) + "]" : "y");
    yv.push_back(view_of(ys[j], "'" + o.y_names.back() + "'"));
  }
}

class PyModel {
 public:
  explicit PyModel(Model m) : m_(std::move(m)) {}
  static PyModel load(const std::string& path, const std::string& weights,
                      const std::vector<std::vector<int64_t>>& shapes) {
    CallScope call;
    py::gil_scoped_release release;
    return PyModel(Model::load(path, weights, shapes));
  }
  const Model& model() const { return m_; }

  // (predictions per output, losses per output or None)
  py::tuple predict(const std::vector<py::array>& xs, const std::vector<py::array>& ys,
                    const std::string& loss, int batch_size, int workers, double scale) const {
    PredictOptions o = predict_options(loss, batch_size, workers, scale);
    std::vector<ArrayView> xv, yv;
    KeptStrings keep;
    views(xs, ys, o, xv, yv, keep);
    const int64_t n = xv.empty() ? 0 : xv[0].rows();
    py::list preds, losses;
    std::vector<std::span<float>> pp, lp;
    for (const TensorInfo& out : m_.outputs()) {
      std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(n)};
      for (int64_t d : out.shape) shape.push_back(static_cast<py::ssize_t>(d));
      py::array_t<float> p(shape);
      pp.emplace_back(p.mutable_data(), static_cast<size_t>(p.size()));
      preds.append(p);
      if (!ys.empty()) {
        py::array_t<float> l(std::vector<py::ssize_t>{static_cast<py::ssize_t>(n)});
        lp.emplace_back(l.mutable_data(), static_cast<size_t>(l.size()));
        losses.append(l);
      }
    }
    {
      CallScope call;
      py::gil_scoped_release release;
      (void)m_.predict(xv, pp, o, yv, lp);  // the figures of the pass are not Python's to show
    }
    return py::make_tuple(preds, ys.empty() ? py::object(py::none()) : py::object(losses));
  }

  // Keras's evaluate: {"loss": ..., metric: ...} in Keras's order.
  py::dict evaluate(const std::vector<py::array>& xs, const std::vector<py::array>& ys,
                    const std::string& loss, const std::vector<std::string>& metrics,
                    int batch_size, int workers, double scale) const {
    EvaluateOptions o;
    static_cast<PredictOptions&>(o) = predict_options(loss, batch_size, workers, scale);
    o.metrics = metrics;
    std::vector<ArrayView> xv, yv;
    KeptStrings keep;
    views(xs, ys, o, xv, yv, keep);
    std::vector<std::pair<std::string, double>> figures;
    {
      CallScope call;
      py::gil_scoped_release release;
      figures = m_.evaluate(xv, yv, o);
    }
    py::dict d;
    for (const auto& [k, v] : figures) d[py::str(k)] = v;
    return d;
  }

 private:
  Model m_;
};

// train()'s options from the package's arguments.
RunOptions run_options(int workers, std::optional<std::string> out, bool resume,
                       double checkpoint_seconds, const std::string& format, Progress progress,
                       bool load_models, bool report, const std::string& save) {
  RunOptions o;
  o.workers = workers;
  o.out = std::move(out);
  o.resume = resume;
  o.checkpoint_seconds = checkpoint_seconds;
  o.format = format;
  o.progress = progress;
  o.load_models = load_models;
  o.report = report;
  o.save = save;
  return o;
}

// Tells the package's callback of one event (see train_fleet); true: it asked to stop that
// model after this epoch.
bool tell(const py::function& f, const Event& e) {
  if (e.kind == Event::Kind::kRunStart) {
    f("start", "", 0, py::cast(e.planned), 0.0, "");
    return false;
  }
  const bool end = e.kind == Event::Kind::kModelEnd;
  const py::object answer = f(end ? "model" : "epoch", e.model, e.epoch, logs_dict(e.logs),
                              e.seconds, end ? status_name(e.status) : "");
  return !end && answer.ptr() == Py_True;
}

// One run of a plan given as a file (`text` empty) or as text. `on_event(kind, name, epoch, logs,
// seconds, status)` is called on this (the caller's) thread once as the run starts ("start":
// `logs` the [(model, planned epochs)] it trains) and as epochs ("epoch") and models ("model":
// its final result, status as results.json spells it) end, in the order they ended; batch
// events are not passed to Python.
//
// With `hold`, a model's worker waits at each epoch end until `on_event` has returned for it, so
// a callback acts at a known point of the run (as Keras's callbacks do), and its answer True
// stops that model after this epoch (RunOptions::stop_model): the package holds whenever the
// caller gives on_epoch_end, so that such a stop does not depend on timing. `load_models`: every
// result carries its Model (the package passes false and reads a model file when asked for).
RunResult train_fleet(const std::string& path, const std::string& text, const std::string& base_dir,
                      const py::dict& arrays, int workers, std::optional<std::string> out,
                      bool resume, double checkpoint_seconds, const std::string& format,
                      Progress progress, std::optional<py::function> on_epoch, bool hold,
                      bool load_models, bool report, const std::string& save) {
  RunOptions o = run_options(workers, std::move(out), resume, checkpoint_seconds, format, progress,
                             load_models, report, save);
  DataArrays views;
  KeptStrings keep;
  for (const auto& [k, v] : arrays) {
    const std::string key = py::cast<std::string>(k);
    views[key] = view_of(py::reinterpret_borrow<py::array>(v), "{array: " + key + "}", &keep);
  }
  std::atomic<bool> stop{false};
  o.stop = &stop;
  const CallScope call(&stop);
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Event> events;
  uint64_t pushed = 0, delivered = 0;           // events, for `hold`
  std::set<std::pair<std::string, int>> stops;  // (model, epoch) whose callback answered True
  if (on_epoch)
    o.on_event = [&](const Event& e) {
      if (e.kind == Event::Kind::kBatchEnd) return;
      std::unique_lock<std::mutex> lock(mu);
      events.push_back(e);
      const uint64_t mine = ++pushed;
      cv.notify_all();
      // A stop (Ctrl-C, a raising callback, the interpreter's exit) lets the worker go on. A
      // model's end is told under the run's results lock: never waited for.
      while (hold && e.kind == Event::Kind::kEpochEnd && delivered < mine && !stop)
        cv.wait_for(lock, std::chrono::milliseconds(50));
    };
  if (on_epoch && hold)
    o.stop_model = [&](const std::string& model, int epoch) {
      std::lock_guard<std::mutex> g(mu);
      return stops.erase({model, epoch}) > 0;
    };
  const PlanInput plan =
      text.empty() ? PlanInput::file(path) : PlanInput::text(text, path, base_dir);
  auto deliver = [&] {
    for (;;) {
      Event e;
      {
        std::lock_guard<std::mutex> g(mu);
        if (events.empty()) return;
        e = std::move(events.front());
        events.pop_front();
      }
      // Counted as delivered even when the callback raises (the run then stops).
      struct Delivered {
        std::mutex& mu;
        std::condition_variable& cv;
        uint64_t& delivered;
        ~Delivered() {
          std::lock_guard<std::mutex> g(mu);
          ++delivered;
          cv.notify_all();
        }
      } counted{mu, cv, delivered};
      if (tell(*on_epoch, e)) {
        std::lock_guard<std::mutex> g(mu);
        stops.emplace(e.model, e.epoch);
      }
    }
  };
  auto drop = [&] {
    std::lock_guard<std::mutex> g(mu);
    events.clear();
    delivered = pushed;
    cv.notify_all();
  };
  RunResult r = run_released<RunResult>([&] { return nnfleet::api::train(plan, views, o); }, stop,
                                        mu, cv, [&] { return !events.empty(); }, deliver, drop);
  return r;
}

// nnfleet::Error and its subclasses as Python exceptions of the same names.
void bind_errors(py::module_& m) {
  py::object base = py::module_::import("builtins").attr("Exception");
  static py::exception<nnfleet::Error> error(m, "Error", base);
  static py::exception<nnfleet::PlanError> plan_error(m, "PlanError", error);
  static py::exception<nnfleet::DataError> data_error(m, "DataError", error);
  static py::exception<nnfleet::ModelError> model_error(m, "ModelError", error);
  static py::exception<nnfleet::FileError> file_error(m, "FileError", error);
  static py::exception<nnfleet::UsageError> usage_error(m, "UsageError", error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const nnfleet::PlanError& e) {
      plan_error(e.what());
    } catch (const nnfleet::DataError& e) {
      data_error(e.what());
    } catch (const nnfleet::ModelError& e) {
      model_error(e.what());
    } catch (const nnfleet::FileError& e) {
      file_error(e.what());
    } catch (const nnfleet::UsageError& e) {
      usage_error(e.what());
    } catch (const nnfleet::Error& e) {
      error(e.what());
    }
  });
}

py::list tensor_list(const std::vector<TensorInfo>& ts) {
  py::list l;
  for (const auto& t : ts) l.append(py::make_tuple(t.name, py::tuple(py::cast(t.shape))));
  return l;
}

void bind_model(py::module_& m) {
  py::class_<PyModel>(m, "Model")
      .def_static("load", &PyModel::load, py::arg("path"), py::arg("weights") = "",
                  py::arg("input_shapes") = std::vector<std::vector<int64_t>>{})
      .def("summary", [](const PyModel& s) { return s.model().summary(); })
      .def_property_readonly("inputs",
                             [](const PyModel& s) { return tensor_list(s.model().inputs()); })
      .def_property_readonly("outputs",
                             [](const PyModel& s) { return tensor_list(s.model().outputs()); })
      .def_property_readonly("path", [](const PyModel& s) { return s.model().path(); })
      .def("count_params", [](const PyModel& s) { return s.model().count_params(); })
      .def("predict", &PyModel::predict, py::arg("xs"), py::arg("ys"), py::arg("loss"),
           py::arg("batch_size"), py::arg("workers"), py::arg("scale"))
      .def("evaluate", &PyModel::evaluate, py::arg("xs"), py::arg("ys"), py::arg("loss"),
           py::arg("metrics"), py::arg("batch_size"), py::arg("workers"), py::arg("scale"))
      .def("save", [](const PyModel& s, const std::string& path) {
        CallScope call;
        py::gil_scoped_release release;
        s.model().save(path);
      });
}

// The run's results as the library fills them (nnfleet/results.h), read-only; the package's
// Run and ModelResult (nnfleet/__init__.py) present them the Keras way.
void bind_results(py::module_& m) {
  py::enum_<Status>(m, "Status")
      .value("PENDING", Status::kPending)
      .value("DONE", Status::kDone)
      .value("DIVERGED", Status::kDiverged)
      .value("FAILED", Status::kFailed)
      .value("CANCELLED", Status::kCancelled)
      .value("PRUNED", Status::kPruned);
  m.def("status_name", &nnfleet::api::status_name, py::arg("status"));
  py::class_<EpochLog>(m, "EpochLog")
      .def_readonly("epoch", &EpochLog::epoch)
      .def_readonly("values", &EpochLog::values)
      .def_readonly("seconds", &EpochLog::seconds);
  py::class_<BestEpoch>(m, "BestEpoch")
      .def_readonly("epoch", &BestEpoch::epoch)
      .def_readonly("monitor", &BestEpoch::monitor)
      .def_readonly("value", &BestEpoch::value);
  py::class_<Rung>(m, "Rung")
      .def_readonly("epochs", &Rung::epochs)
      .def_readonly("value", &Rung::value)
      .def_readonly("decision", &Rung::decision);
  py::class_<ModelResult>(m, "ModelResult")
      .def_readonly("name", &ModelResult::name)
      .def_readonly("status", &ModelResult::status)
      .def_readonly("message", &ModelResult::message)
      .def_readonly("epochs", &ModelResult::epochs)
      .def_readonly("params", &ModelResult::params)
      .def_readonly("seconds", &ModelResult::seconds)
      .def_readonly("metrics", &ModelResult::metrics)
      .def_readonly("last_metrics", &ModelResult::last_metrics)
      .def_readonly("best", &ModelResult::best)
      .def_readonly("history", &ModelResult::history)
      .def_readonly("model_file", &ModelResult::model_file)
      .def_readonly("parameters", &ModelResult::parameters)
      .def_readonly("rungs", &ModelResult::rungs)
      .def_property_readonly("model", [](const ModelResult& r) {
        return r.model ? py::cast(PyModel(*r.model)) : py::object(py::none());
      });
  py::class_<RunResult>(m, "RunResult")
      .def_readonly("models", &RunResult::models)
      .def_readonly("out_dir", &RunResult::out_dir)
      .def_readonly("interrupted", &RunResult::interrupted)
      .def_readonly("write_error", &RunResult::write_error)
      .def_readonly("makespan", &RunResult::makespan)
      .def_readonly("workers", &RunResult::workers)
      .def_readonly("rank_by", &RunResult::rank_by)
      .def_readonly("rank_higher_is_better", &RunResult::rank_higher_is_better)
      .def_readonly("ranking", &RunResult::ranking)
      .def_readonly("report_path", &RunResult::report_path)
      .def_readonly("report_error", &RunResult::report_error);
}

void bind_run(py::module_& m) {
  // RunOptions::progress (nnfleet/run.h), the one spelling of what a run prints.
  py::enum_<Progress>(m, "Progress")
      .value("LIVE", Progress::kLive)
      .value("LINES", Progress::kLines)
      .value("JSON", Progress::kJson)
      .value("QUIET", Progress::kQuiet);
  m.def("train", &train_fleet, py::arg("path"), py::arg("text"), py::arg("base_dir"),
        py::arg("arrays"), py::arg("workers"), py::arg("out"), py::arg("resume"),
        py::arg("checkpoint_seconds"), py::arg("format"), py::arg("progress"), py::arg("on_epoch"),
        py::arg("hold") = false, py::arg("load_models") = false, py::arg("report") = false,
        py::arg("save") = "");
  m.def(
      "write_report",
      [](const std::string& run_dir, const std::string& group_by) {
        CallScope call;
        py::gil_scoped_release release;
        return nnfleet::api::write_report(run_dir, false, group_by);
      },
      py::arg("run_dir"), py::arg("group_by") = "",
      "Writes <run_dir>/report.html (as `nnfleet report`; group_by: its per-group view) and "
      "returns its path");
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "nnfleet's engine (the C++ API); use the functions of the nnfleet package.";
  m.attr("__version__") = NNFLEET_VERSION_STRING;
  bind_errors(m);
  bind_model(m);
  bind_results(m);
  bind_run(m);
  m.def("plan_defaults_keys", &nnfleet::api::plan_defaults_keys);
  m.def("sample_parameter", &nnfleet::api::sample_parameter, py::arg("seed"), py::arg("trial"),
        py::arg("name"), py::arg("distribution_json"), py::arg("sampler") = "random",
        py::arg("dimension") = 0,
        "The value (JSON text) a search's parameter takes in a trial, as a plan's search.space "
        "draws it (nnfleet/search.h)");
  m.def("fashion_mnist_files", &nnfleet::api::fashion_mnist_files, py::arg("split"),
        "The IDX files (images, labels) of Fashion-MNIST's split: the Debian package "
        "dataset-fashion-mnist, or $NNFLEET_FASHION_MNIST");
  m.def(
      "_test_folder_barrier",
      [](int parties) { nnfleet::api::testing::set_run_folder_barrier(parties); },
      py::arg("parties"), "A test hook: the next `parties` folder creations meet before renaming");
  m.def(
      "stop", [] { Calls::get().stop_all(false); },
      "Stops every train running in this process (each model checkpoints; the train returns "
      "with interrupted set)");
  m.def(
      "shutdown",
      [](bool wait) {
        Calls::get().stop_all(true);
        if (wait) Calls::get().wait_idle();
      },
      py::arg("wait"),
      "At interpreter exit: stops every running train, refuses new calls, and with `wait` "
      "waits until no call is inside the engine");
}
