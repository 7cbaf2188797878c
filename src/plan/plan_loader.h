// The pieces of a plan's load, each with one job, sharing one small context (the document, the
// problems list, the directory of relative paths): the data sources (plan_data.cpp), the
// expansion of entries over `defaults` and their grids (plan_expand.cpp), and the building of
// each model's spec (plan_models.cpp); plan.cpp holds the top-level load. Internal to src/plan.
//
// Every piece reports into the context's Problems and goes on, so that a plan's problems are
// reported all at once; the order of the calls is the order of the problems on one line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "plan/plan.h"
#include "plan/plan_problems.h"
#include "plan/plan_yaml.h"
#include "plan/search_space.h"

namespace nnfleet::plan_detail {

// The most times a `repeat:` block repeats, and the most values of a `per` parameter.
inline constexpr int64_t kMaxRepeat = 1000;

// The keys of a model entry and of `defaults` (plan_expand.cpp).
extern const std::vector<std::string> kModelKeys;
extern const std::vector<std::string> kDefaultsKeys;

// What every piece of one load shares. Copies refer to the same document and problems.
struct PlanContext {
  const LocatedJson& doc;
  Problems& pr;
  std::filesystem::path dir;  // relative file names are taken from here
  bool arrays;                // the caller gives arrays: sources may name them (load_plan)

  // `p` taken from dir.
  std::string resolve(const std::string& p) const;
};

// A plan's search as its expansion uses it (plan_search.cpp).
struct SearchTrials {
  bool sampled = false;  // the models are templates for trials drawn from `space`
  SearchSpace space;
  std::vector<Trial> trials;  // sampled: trial k's values
  int digits = 1;             // of the {trial} text: those of trials - 1
  // Every trial's epochs: the scheduler's max_epochs (none with budgets in samples).
  std::optional<int> epochs;
  std::string epochs_path;  // "search.scheduler", for messages
};

// The plan's `search:` mapping `r` into `spec`, and into `out` its space and, when it has one,
// its trials drawn under `seed`.
void read_search(const PlanContext& cx, const Json& r, uint64_t seed, SearchSpec& spec,
                 SearchTrials& out);
void read_space(const PlanContext& cx, const Json& v, SearchSpace& space);
// A `when:` mapping at `path` over the first `earlier` parameters of `space` (`whose` says which
// in messages: "before it", "of search.space").
When read_when(Problems& pr, const std::string& path, const Json& v, const SearchSpace& space,
               size_t earlier, const char* whose);
// The epochs `s` plans for n trials (design "max_total_epochs"): halving with bracket b (trials
// k with k % brackets == b) starting at rung b and floor(n_b / rf^j) (at least 1) trials
// reaching its j-th rung; median and none: n * max_budget.
int64_t planned_epochs(const SearchSchedule& s, size_t n);
// The most trials, at most n, whose planned epochs fit spec.max_total_epochs (n without one);
// reports a max_total_epochs too small for one trial.
size_t fit_trials(Problems& pr, const SearchSpec& spec, size_t n);

// A layers list with its `repeat:` blocks expanded (plan_repeat.cpp): each item and the field
// path it was written at.
struct RepeatedLayers {
  Json list = Json::array();
  std::vector<std::string> paths;
};
// `list` at `path`, `{repeat: N, layers: [...]}` items replaced by N copies of their layers with
// "{i}" the copy's index (a count "{var}" taken from `values`); problems reported into `pr`.
RepeatedLayers expand_repeats(Problems& pr, const Json& list, const std::string& path,
                              const std::map<std::string, Json>& values);

// What expands a plan's models after load_plan: the document (for the lines of messages and of
// ModelSpec::where), and every entry once, merged over `defaults`.
class ModelExpander {
 public:
  struct Entry {
    Json merged;                              // the entry over `defaults`, placeholders kept
    std::map<std::string, std::string> base;  // key -> where it came from ("defaults", "models[0]")
    std::string path;                         // "models[0]"
    std::vector<std::pair<std::string, Json>> vars;  // the grid in written order, each its values
    When when;                                       // a search's template: the trials it makes
    bool is_template = false;
    // Its placeholders stand only in `name`, `parameters` and `optimizer` (fixed_entry()).
    bool fixed = false;
    // A fixed entry of two or more models whose first built without a problem (a grid over
    // learning rates and repeats): its models are that first model (without its text) but for
    // their names and optimizers (PlanModels::to_train). Set by EntryExpander::start_quick, the
    // model it checks the entry's other points against; null for any other entry.
    std::shared_ptr<const ModelSpec> first;
  };
  ModelExpander(std::string file, std::filesystem::path dir)
      : file(std::move(file)), dir(std::move(dir)) {}
  // The model at `r`, as load_plan checked it (without constructing its layers again).
  ModelSpec expand(const ModelRef& r, bool text = true) const;
  // The optimizer of the model at `r` (its entry's `optimizer`, placeholders substituted), as
  // load_plan checked it.
  OptimizerSpec optimizer(const ModelRef& r) const;
  // PlanModels::parameters of the model at `r`.
  Parameters parameters(const ModelRef& r) const;

  std::string file;           // the plan's path as given, for messages
  std::filesystem::path dir;  // relative file names are taken from here
  bool arrays = false;        // PlanContext::arrays
  LocatedJson doc;
  std::vector<Entry> entries;
  SearchTrials search;
  bool has_search = false;  // the plan has `search:`
};

// Data sources (plan_data.cpp).
// A data mapping at field path `path` ("data", "models[2].data").
DataSpec read_data(const PlanContext& cx, const std::string& path, const Json& v);
// The index of `d` in `sources`, appended when no source there has the same form.
size_t add_source(DataSpec d, std::vector<DataSpec>& sources);

// Builds the ModelSpec of one expanded entry, checking every field (plan_models.cpp).
class ModelBuilder {
 public:
  explicit ModelBuilder(PlanContext cx) : cx_(cx) {}
  // A builder for building `o`'s models apart (on another thread), reporting into `pr`: the same
  // document, default source and checked layers; no data sources (only models without data of
  // their own are built apart).
  ModelBuilder(const ModelBuilder& o, Problems& pr)
      : cx_{o.cx_.doc, pr, o.cx_.dir, o.cx_.arrays},
        has_default_(o.has_default_),
        check_layers_(o.check_layers_),
        checked_layers_(o.checked_layers_) {}

  // The plan's `data:` (sources[0]) when it has one: the source of models without their own.
  void set_default_source(std::vector<DataSpec>* sources, bool has_default) {
    sources_ = sources;
    has_default_ = has_default;
  }
  // Building models load_plan checked already: their layers are not constructed again (about
  // half the time of expanding a tiny model), and their data source is already known.
  void set_checked() {
    check_layers_ = false;
    has_default_ = true;
  }
  // Models built without their `expanded` text (ModelSpec::expanded left empty): a quarter of
  // the time of expanding a tiny model, which a worker does per job and never reads.
  void set_no_text() { text_ = false; }
  // The model of entry `m` (placeholders substituted) at `entry` ("models[0]"); `base` says where
  // each key came from.
  ModelSpec build(const Json& m, const std::map<std::string, std::string>& base,
                  const std::string& entry);
  // The field path each item of the next models' layers lists was written at (their `repeat:`
  // blocks expanded), or nullptr: their index in the list.
  void set_layer_paths(const std::vector<std::string>* paths) { layer_paths_ = paths; }
  // The text that the last model built shares with every model of its kind (PlanModels::kind):
  // kind_items(), what it shares with every model of its entry when the entry varies only in
  // name, parameters and optimizer, then optimizer_kind() of its optimizer.
  const std::string& kind_key() const { return kind_key_; }
  const std::string& kind_items() const { return kind_items_; }
  static std::string optimizer_kind(const OptimizerSpec& o);
  // What is wrong with `name` as a model's name (empty: nothing), one message each.
  static std::vector<std::string> name_problems(const std::string& name);

 private:
  // The field path of a key of the entry: under the entry or `defaults`, wherever it came from.
  struct KeyPaths {
    const std::map<std::string, std::string>& base;
    const std::string& entry;
    std::string operator()(const std::string& k) const;
  };
  void model_name(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex);
  void model_architecture(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex);
  void model_data(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex);
  void model_parameters(const Json& m, const KeyPaths& at, Json& ex);
  void layers(const Json& list, const std::string& path, ModelSpec& s, Json& ex);
  void call_layer(const Json& name, const std::string& cp,
                  const std::map<std::string, std::string>& used, ModelSpec& s, Json& out);
  // The default name of a layer of class `stem` not yet in `used`.
  static std::string layer_name(const std::string& stem, std::map<std::string, int>& counters,
                                const std::map<std::string, std::string>& used);
  // freeze, unfreeze_from and restore_optimizer of a `keras:` model.
  void fine_tuning(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex);
  // The parts of a model entry, in the order their problems are listed.
  void model_schedule(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex);
  bool model_losses(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex);
  void model_loss_weights(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex);
  std::vector<std::string> model_metrics(const Json& m, const KeyPaths& at, bool loss_ok,
                                         ModelSpec& s, Json& ex);
  void model_optimizer(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex);
  void model_early_stopping(const Json& m, const KeyPaths& at, std::vector<std::string>& monitors,
                            ModelSpec& s, Json& ex);
  void check_name(const std::string& path, const std::string& name);
  void expanded_text(const Json& ex, ModelSpec& s);
  // Constructs a layer through the registry, which throws what is wrong with its config, unless
  // the same class and config was constructed before (a grid over anything but its layers
  // repeats them: the 8,000 models of an 8 x 1,000 grid over units and learning rate have 8
  // distinct Dense configs).
  void check_layer(const std::string& cls, const Json& cfg);
  static constexpr size_t kMaxCheckedLayers = 4096;  // bounds what a plan's load holds for this

  PlanContext cx_;
  std::vector<DataSpec>* sources_ = nullptr;
  bool has_default_ = false;
  bool check_layers_ = true;
  std::set<std::string> checked_layers_;  // class and config of layers constructed without error
  bool text_ = true;
  const std::vector<std::string>* layer_paths_ = nullptr;
  std::string kind_key_, kind_items_;
};

// Reads the plan's model entries, merges each over `defaults` and expands it over its grid,
// building every model once to check it (plan_expand.cpp).
class EntryExpander {
 public:
  explicit EntryExpander(PlanContext cx) : cx_(cx), builder_(cx) {}
  // An expander for `o`'s models apart (on another thread), reporting into `pr`.
  EntryExpander(const EntryExpander& o, Problems& pr)
      : cx_{o.cx_.doc, pr, o.cx_.dir, o.cx_.arrays},
        builder_(o.builder_, pr),
        quick_(o.quick_),
        search_(o.search_) {}
  // Up to how many threads models() may check the models of one entry on (1: this one only).
  void set_threads(int n) { threads_ = n; }
  // The plan's search (models() then makes its trials; every trial's epochs are the scheduler's).
  void set_search(const SearchTrials* s) { search_ = s; }
  ModelBuilder& builder() { return builder_; }

  // Appends the entries of `list`, merged over `defaults`, to `ex`, and a ref per model of their
  // grids to `out`, each model expanded and checked once.
  void models(const Json& defaults, const Json& list, ModelExpander& ex,
              std::vector<ModelRef>& out);
  // Point `point` of entry `e`'s grid, expanded into its ModelSpec.
  ModelSpec expand(const ModelExpander::Entry& e, size_t point);
  // Point `point` of quick_'s entry `e` checked without building it: its name and optimizer
  // substituted, the name checked, the optimizer parsed and the parameters substituted; its
  // name and kind key into the outputs. False when a check fails (the caller then expands it,
  // which reports exactly what is wrong).
  bool quick_point(const ModelExpander::Entry& e, size_t point, std::string& name,
                   std::string& key) const;

 private:
  struct Expanded {
    std::string name_path;      // "models[0].name"
    std::string entry;          // "models[0]"
    std::string name_template;  // the name as written
    std::vector<std::string> grid_vars;
  };
  struct Point {  // a model: its entry (ModelRef::entry) and point (grid point or trial)
    uint32_t entry;
    size_t point;
  };
  bool entry_keys(const Json& e, const std::string& ep);
  bool grid(const Json& e, const std::string& ep, std::vector<std::pair<std::string, Json>>& vars,
            size_t& count);
  void templates(const Json& defaults, const Json& list, ModelExpander& ex,
                 std::vector<ModelRef>& out);
  void search_epochs(const ModelExpander::Entry& e, Json& m);
  void check_unique_names(const std::vector<ModelRef>& models);
  void expand_points(const std::vector<ModelExpander::Entry>& entries, size_t count,
                     const std::function<Point(size_t)>& at, bool apart,
                     std::vector<ModelRef>& out);
  void expand_points_apart(const std::vector<ModelExpander::Entry>& entries, size_t count,
                           const std::function<Point(size_t)>& at, std::vector<ModelRef>& out);

  // An entry whose models differ only in name, parameters and optimizer, with its first model
  // built and checked without a problem: its other points are checked by quick_point (a tenth
  // of building each: 100,000 such models took 1.2 s of a run's start to load, Zen 5).
  struct Quick {
    bool on = false;
    uint32_t entry = 0;   // ModelRef::entry
    uint32_t source = 0;  // its first model's
    std::string items;    // kind_items() of its first model
  };
  void start_quick(ModelExpander::Entry& e, uint32_t index, size_t count);
  // The ref of point `p`, checked by quick_point or expanded by `l`.
  static ModelRef point_ref(EntryExpander& l, const std::vector<ModelExpander::Entry>& entries,
                            Point p, std::string& key);

  PlanContext cx_;
  ModelBuilder builder_;
  Quick quick_;
  const SearchTrials* search_ = nullptr;
  int threads_ = 1;
  // Models per share when an entry's are checked on several threads: 64 tiny ones are about
  // 2 ms of a thread's work.
  static constexpr size_t kBlock = 64;
  std::vector<Expanded> entries_;  // one per plan entry that expanded (ModelRef::entry)
  // ModelRef::kind by ModelBuilder::kind_key, numbered in plan order; kind_of() adds one.
  std::unordered_map<std::string, uint32_t> kinds_;
  uint32_t kind_of(const std::string& key);
};

}  // namespace nnfleet::plan_detail
