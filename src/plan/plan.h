// Plan: the YAML (or JSON) file `nnfleet train` runs: data sources, defaults, and model entries
// (Keras class names and config keys), expanded over grids into one ModelSpec per model (made
// when it is asked for: PlanModels).
// load_plan() reports every problem of the file at once, each with file, line and field path:
//   fleet.yaml:14: models[1].layers[2].Dense.units: expected a positive integer, got "abc"
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "loss/loss.h"
#include "optim/optimizer.h"

namespace nnfleet {

// Where a dataset comes from. Exactly one form is set.
struct DataSource {
  // kArrays: arrays a program gives by key (`{x: {array: x}, y: {array: y}}`; api::train's
  // DataArrays, Python's x and y), never files.
  enum class Kind { kFashionMnist, kNpy, kNpz, kCsv, kIdx, kArrays };
  Kind kind = Kind::kNpy;
  std::string split;  // fashion-mnist: "train" or "test"
  std::string x, y;   // npy: paths; idx: images, labels; npz: member keys; arrays: keys
  std::string file;   // npz or csv path
  std::string label;  // csv label column
  // Keras's sample_weight, one non-negative weight per sample: an .npy path, the npz key, or
  // an array's key (npy, npz and arrays sources only); empty: none.
  std::string sample_weight;
  // npy, npz and arrays sources of models with several inputs or outputs (`x: [a.npy, b.npy]`):
  // the second and later inputs and targets, in the model's input and output order (x and y
  // hold the first).
  std::vector<std::string> more_x, more_y;
  Json to_json() const;  // the plan form, for plan.yaml
};

struct DataSpec {
  DataSource train;
  std::optional<DataSource> test;
  // Keras's validation_data: a source of its own, used as validation_split's part would be (the
  // models validate on it after each epoch, never train on it); never given with validation_split.
  std::optional<DataSource> validation;
  double scale = 1.0;  // applied to x
  // `take: N`: only the first N samples of train are used (as tf.data's take), before the
  // validation split (0: all of them).
  int64_t take = 0;
  double validation_split = 0.0;       // the last fraction of train, taken before shuffling
  std::string validation_split_where;  // "fleet.yaml:7: data.validation_split", for messages
  // Where the source was first given, for its load errors: empty for the plan's own `data:`
  // (its messages are named by the files), "fleet.yaml:21: models[1].data (model 'lstm-03')"
  // for a model's own.
  std::string where;
  Json to_json() const;  // the plan form; two specs with the same form are one source
};

struct EarlyStopping {
  std::string monitor = "val_loss";
  int patience = 0;
  double min_delta = 0.0;
  bool restore_best_weights = false;
  std::string mode = "auto";  // auto, min, max
  int start_from_epoch = 0;
};

// Keras's ReduceLROnPlateau callback (keras/src/callbacks/reduce_lr_on_plateau.py) with its
// defaults: after `patience` epochs without an improvement of `monitor` by more than
// `min_delta`, the rate becomes max(rate * factor, min_lr), then `cooldown` epochs pass before
// epochs without improvement count again. Refused with a learning-rate schedule, as Keras does.
struct ReduceLrOnPlateau {
  std::string monitor = "val_loss";
  double factor = 0.1;  // in [0, 1)
  int patience = 10;
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0.0;
  std::string mode = "auto";  // auto, min, max
};

struct LayerEntry {
  std::string class_name;
  Json config;
  std::string where;  // "fleet.yaml:14: models[1].layers[2].Dense" for messages
  // "- call: dense_1": the earlier layer of that name applied again to the previous output (a
  // shared layer: the same weights, its gradients summed over the calls); class_name and config
  // are that layer's.
  std::string call = {};
};

struct ModelSpec {
  std::string name;
  std::string where;  // "fleet.yaml:21: models[1]" (the entry the model came from)
  std::vector<LayerEntry> layers;
  std::string keras;  // path of a Keras model file to start from (instead of layers)
  size_t source = 0;  // its data: Plan::sources[source] (the plan's `data:` or the model's own)
  int epochs = 1;
  int batch_size = 32;
  int batch_split = 0;  // pieces per batch (Network::pieces); 0: automatic (batch_pieces in job.h)
  bool shuffle = true;
  LossSpec loss;
  // A model with several outputs: one loss per output (`loss: [mse, mae]` in output order, or
  // `loss: {main_output: mse, ...}` by output name; `loss` is then the first), and `loss_weights`
  // likewise; names are "" in the list forms. Empty: `loss` on every output, weight 1.
  std::vector<std::pair<std::string, LossSpec>> output_losses;
  std::vector<std::pair<std::string, double>> loss_weights;
  std::vector<std::string> metrics;           // unweighted, as Keras's compile(metrics=...)
  std::vector<std::string> weighted_metrics;  // weighted by the samples' weights
  OptimizerSpec optimizer;
  std::optional<EarlyStopping> early_stopping;
  std::optional<ReduceLrOnPlateau> reduce_lr_on_plateau;
  // Keras's class_weight: the weight of each class's samples in the training loss (classes not
  // listed weigh 1); empty: none. Refused with a sample_weight source, as Keras does.
  std::map<int, float> class_weight;
  // Fine-tuning a `keras:` model: layers to freeze (names or indices into the model's layers, a
  // nested model's name freezing all of its layers), or the layer from which on everything
  // trains (every layer before it frozen, as Keras's transfer-learning recipe does); each with
  // where it was given ("fleet.yaml:9: models[0].freeze[1]") for its errors.
  std::vector<Json> freeze;
  std::vector<std::string> freeze_where;
  std::string unfreeze_from, unfreeze_from_where;
  // restore_optimizer: train a `keras:` model on with the optimizer its file holds (class,
  // configuration, slot variables and iterations), as Keras's load_model restores it.
  bool restore_optimizer = false;
  // The fully expanded entry (defaults applied, grid values substituted) as compact JSON text
  // (plan.yaml and the MPI plan hash are made from it; expanded_json() parses it).
  std::string expanded;
  Json expanded_json() const { return Json::parse(expanded); }
};

namespace plan_detail {
class ModelExpander;  // plan.cpp: a plan's entries, merged over `defaults`, with their grids
// One model of a plan before it is expanded: its entry, the point of that entry's grid (the
// last var varying fastest), its data (Plan::sources[source]) and its name.
struct ModelRef {
  uint32_t entry = 0;
  uint32_t point = 0;
  uint32_t source = 0;
  uint32_t kind = 0;  // PlanModels::kind (in the padding: a ref stays 48 bytes)
  std::string name;
};
}  // namespace plan_detail

// The models of a plan, each expanded when it is asked for: the plan holds every entry once
// (merged over `defaults`, with its grid) and per model only a ModelRef (about 60 bytes), where
// a ModelSpec of a tiny 3-layer model took about 3 KB. Expanding gives the spec load_plan
// validated (the same text in `expanded`), without constructing its layers again.
// Thread-safe: const methods may run on several threads at once.
class PlanModels {
 public:
  PlanModels() = default;
  PlanModels(std::shared_ptr<const plan_detail::ModelExpander> expander,
             std::vector<plan_detail::ModelRef> refs);
  size_t size() const { return refs_.size(); }
  bool empty() const { return refs_.empty(); }
  // Model k, expanded (tens of microseconds for a tiny model); at() checks k (std::out_of_range).
  ModelSpec operator[](size_t k) const;
  ModelSpec at(size_t k) const;
  ModelSpec back() const { return (*this)[size() - 1]; }
  // The same without its `expanded` text, which training never reads (a worker's expansion of
  // each job, a quarter faster); checks k (std::out_of_range).
  ModelSpec to_train(size_t k) const;
  // Without expanding: its name and its data, Plan::sources[source(k)].
  const std::string& name(size_t k) const { return refs_[k].name; }
  // Model k's parameters, as results record them: its grid point's vars (written order), its
  // search trial's drawn values (the space's order), or its entry's `parameters:` mapping.
  std::vector<std::pair<std::string, Json>> parameters(size_t k) const;
  size_t source(size_t k) const { return refs_[k].source; }
  // Model k's kind, numbered from 0 in plan order: models of one kind have the same expanded
  // entry but for their name, seed, parameters and optimizer, whose class and flags (momentum or
  // not, nesterov, amsgrad, centered, weight decay or not, a schedule or not) they share too; a
  // grid over learning rates, seeds or repeats is one kind. So they build the same network, with
  // the same slots, and validate alike (the fleet validates one per kind and source).
  uint32_t kind(size_t k) const { return refs_[k].kind; }
  // The plan's entries as written (merged over `defaults`, placeholders kept, `grid:` added) and
  // each grid's variables in written order, when the models are exactly every point of every
  // entry in plan order and no entry names a file (`keras:`, `data:`: the expanded models hold
  // their paths resolved); empty otherwise, and for a search. A large fleet's plan.yaml is
  // written from these: 100,000 models of one grid entry are a few lines, not 7.9 MB.
  struct GridEntry {
    Json entry;
    std::vector<std::string> vars;
  };
  std::vector<GridEntry> grid_entries() const;

  // Plan order, each model expanded as it is reached.
  class Iterator {
   public:
    Iterator(const PlanModels* m, size_t k) : m_(m), k_(k) {}
    ModelSpec operator*() const { return (*m_)[k_]; }
    Iterator& operator++() {
      ++k_;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return k_ != o.k_; }

   private:
    const PlanModels* m_;
    size_t k_;
  };
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size()}; }

 private:
  std::shared_ptr<const plan_detail::ModelExpander> expander_;
  std::vector<plan_detail::ModelRef> refs_;
};

// A plan's `search:` (README "Search"): its trials (sampled from `space`, or the plan's models),
// and the scheduler that decides which trials train on. Every decision is a function of the
// metrics of the trials it compares (ties broken by trial index), never of completion order.
struct SearchParameter {  // one parameter of the space, for reports and trials.csv
  std::string name;       // as the models use it ("lr", "width" for width_0, width_1, ...)
  std::string kind;       // "float", "int", "choice", "fixed"
  bool log = false;       // drawn on a log scale: charted on log axes
};

struct SearchSchedule {
  // kNone: every trial trains to max_budget (early stopping as the models say); kHalving:
  // successive halving (Hyperband with brackets > 1); kMedian: at every rung, the trials worse
  // than the rung's median stop.
  enum class Kind { kNone, kHalving, kMedian };
  Kind kind = Kind::kNone;
  int reduction_factor = 3;  // halving: the best 1/reduction_factor of a rung go on (>= 2)
  // Rung budgets: min_budget * reduction_factor^j (halving) or min_budget + j * interval
  // (median), up to max_budget, which is always the last rung. In epochs, or in training
  // samples when `samples` (each trial's rung epochs: ceil(budget / its training rows)).
  int64_t min_budget = 1;
  int64_t max_budget = 1;
  int64_t interval = 1;  // median
  int brackets = 1;      // halving: Hyperband's brackets; bracket b starts at min_budget * rf^b
  bool samples = false;
  // The rung budgets, ascending, the last max_budget (bracket b's are those from index b on).
  std::vector<int64_t> rungs() const;
};

struct SearchSpec {
  std::string where;     // "fleet.yaml:3: search", for messages
  bool sampled = false;  // trials drawn from `space:` (else every model of the plan is one)
  size_t trials = 0;     // the number of trials (models of the plan)
  std::string sampler = "random";  // "random" or "sobol"
  SearchSchedule schedule;
  std::string metric = "val_loss";  // the figure rungs compare, from every trial's history
  bool higher_is_better = false;    // `mode: max` (auto: from the metric's name)
  int64_t max_total_epochs = 0;     // 0: none (else fewer trials, so that the plan fits it)
  double time_limit_seconds = 0;    // 0: none; not deterministic: stops at the next rung
  // The space's, in written order; empty without a space (each model's own are then
  // PlanModels::parameters).
  std::vector<SearchParameter> parameters;
  // The plan.yaml form: scheduler, metric, mode (min or max), max_total_epochs and time_limit.
  // Not the space, sampler or trials: plan.yaml's models are the trials, each with the
  // `parameters:` it drew, so the file loads back to the same trials as a search without space.
  Json to_json() const;
};

// `save:` which trained model files a run keeps (README.md, "What you get"): every model's, the
// best N by the leaderboard's rank key (ties broken by plan order), or none. kDefault (no
// `save:`): every model's up to kSaveAllUpTo models, the best kDefaultBest above (a 100,000-model
// run of tiny models would write 2.7 GB of model files for models nobody opens).
struct SavePolicy {
  enum class Kind { kDefault, kAll, kBest, kNone };
  Kind kind = Kind::kDefault;
  size_t best = 0;  // kBest: N >= 1
  static constexpr size_t kSaveAllUpTo = 10000, kDefaultBest = 100;
  // kDefault resolved for a plan of `models` models (never kDefault).
  SavePolicy resolved(size_t models) const;
  // "all", "best N", "none" ("" for kDefault).
  std::string text() const;
};
// `text` ("all", "best N" with N >= 1, "none") as a policy; nullopt with `why` (what was
// expected) otherwise.
std::optional<SavePolicy> parse_save_policy(const std::string& text, std::string& why);

struct Plan {
  std::string path;  // as given
  std::string name;  // file stem, for the default output folder
  uint64_t seed = 0;
  // The plan's top-level `data:`, the default of every model without its own (train.x empty and
  // has_data false when the plan has none and every model gives its own). When given it is
  // sources[0].
  DataSpec data;
  bool has_data = false;
  // Every distinct data source of the plan (same resolved files and options: one source), in the
  // order first used. Each is loaded once and shared by the models whose `source` names it.
  std::vector<DataSpec> sources;
  PlanModels models;
  // `search:` when the plan has one; then every model is a trial (the k-th model, trial k).
  std::optional<SearchSpec> search;
  // `group_by:` (a recorded parameter's name, checked) or "": the report's per-group view.
  std::string group_by;
  // `save:` (or the run's --save / save=, which replaces it before the run and so is in its
  // plan.yaml).
  SavePolicy save;
};

// The keys `defaults:` accepts, sorted (the table check_keys reads).
const std::vector<std::string>& plan_defaults_keys();

// Reads, expands and checks a plan (`data:` at the top, in `defaults` or in a model entry, where
// grid placeholders work in its paths: series_{k}_x.npy): types and ranges of every field,
// unique file-safe model names, known layer classes and valid layer configs (every layer is
// constructed once through the registry), known losses/optimizers/metrics/activations with the
// valid names listed, data for every model. Does not touch the data. Throws PlanError whose
// message lists every problem found, one per line. Sources of arrays (`{x: {array: x}, ...}`)
// are a problem unless `arrays` says the caller gives arrays (a program does, through
// api::train's DataArrays; `nnfleet train` never does); their keys are looked up only when the
// data is loaded.
Plan load_plan(const std::string& path, bool arrays = false);
// The same for a plan's text: `path` names it in messages (and the default output folder), and
// relative file names are taken from `base_dir`. A grid's models are checked on up to `threads`
// threads (0: one per CPU this process may use), with the same problems, in the same order, on
// any number. Throws PlanError.
Plan parse_plan(const std::string& text, const std::string& path, const std::string& base_dir,
                int threads = 0, bool arrays = false);

// Serializes the expanded plan (seed, data and every model's `expanded`) as YAML, one model
// expanded at a time, so the text is the only whole copy. With `threads` > 1, that many threads
// expand and write the models; the text is the same. `factored` (a large fleet's plan.yaml): the
// plan's entries with their grids (PlanModels::grid_entries) where it has them, no model expanded;
// else the first model's settings are written as `defaults:` and each model as only what differs
// from them (null for a setting it has not). Either loads to the same models; not for a search.
std::string plan_to_yaml(const Plan& plan, int threads = 1, bool factored = false);

}  // namespace nnfleet
