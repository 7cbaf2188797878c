// Job: the training loop of one model.
#include "fleet/fit/job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <new>
#include <numeric>

#include "fleet/fit/adapt.h"
#include "fleet/fit/checkpoint.h"
#include "fleet/fit/lr_plateau.h"
#include "layers/registry.h"
#include "layers/string_layer.h"
#include "platform/test_hold.h"

namespace nnfleet {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The job's metrics: the plan's `metrics` (unweighted) and `weighted_metrics` (weighted by the
// samples' weights), as Keras's compile() has them, per model output, with their history keys
// (a weighted metric whose key is taken is "weighted_<key>", as Keras names it). A model with
// several outputs also reports each output's own loss first, and its keys carry the output's
// name as Keras's do ("main_output_loss", "main_output_mae"). One state array holds it all.
class JobMetrics {
 public:
  JobMetrics(const ModelSpec& spec, const TrainSpec& train, const Network& net) {
    const size_t outs = net.model().num_outputs();
    auto prefix = [&](size_t j) { return outs > 1 ? net.model().output_name(j) + "_" : ""; };
    if (outs > 1)
      for (size_t j = 0; j < outs; ++j) add_slot(prefix(j) + "loss", kLossPart, j);
    for (bool weighted : {false, true})
      for (size_t j = 0; j < outs; ++j) {
        Part p{j, weighted,
               MetricSet(weighted ? spec.weighted_metrics : spec.metrics, train.loss_of(j),
                         static_cast<int>(net.output_features(j)), net.output_steps(j)),
               state_size_};
        state_size_ += p.set.state_size();
        parts_.push_back(std::move(p));
        for (size_t m = 0; m < parts_.back().set.size(); ++m) {
          const std::string key = prefix(j) + parts_.back().set.key(m);
          const bool taken = std::find(keys_.begin(), keys_.end(), key) != keys_.end();
          add_slot(weighted && taken ? "weighted_" + key : key, parts_.size() - 1, m);
        }
      }
  }
  size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }
  const std::string& key(size_t m) const { return keys_[m]; }
  size_t state_size() const { return state_size_; }
  // Adds a batch of n rows: the network's outputs against targets[j] (per output).
  void accumulate(double* state, int n, const Network& net, const Targets* targets) const {
    for (const Part& p : parts_) {
      const Targets t = net.on_output(targets[p.output], p.output);
      p.set.accumulate(state + p.offset, n, net.output(p.output), t,
                       p.weighted ? t.weights : nullptr);
    }
  }
  // Adds output j's loss summed over a batch of n rows (several outputs only).
  void add_output_loss(double* state, size_t j, double sum, int n) const {
    for (const Slot& sl : slots_)
      if (sl.part == kLossPart && sl.index == j) {
        state[sl.offset] += sum;
        state[sl.offset + 1] += n;
      }
  }
  double value(size_t m, const double* state) const {
    const Slot& sl = slots_[m];
    if (sl.part == kLossPart)
      return state[sl.offset + 1] > 0 ? state[sl.offset] / state[sl.offset + 1] : 0.0;
    const Part& p = parts_[sl.part];
    return p.set.value(sl.index, state + p.offset);
  }

 private:
  static constexpr size_t kLossPart = static_cast<size_t>(-1);
  struct Part {
    size_t output;
    bool weighted;
    MetricSet set;
    size_t offset;  // into the state
  };
  struct Slot {
    size_t part;    // kLossPart: an output's loss (index: the output)
    size_t index;   // in the part's set
    size_t offset;  // into the state (output losses: sum, then rows)
  };
  void add_slot(const std::string& key, size_t part, size_t index) {
    keys_.push_back(key);
    slots_.push_back({part, index, part == kLossPart ? state_size_ : 0});
    if (part == kLossPart) state_size_ += 2;
  }
  std::vector<Part> parts_;
  std::vector<Slot> slots_;
  std::vector<std::string> keys_;
  size_t state_size_ = 0;
};

// Reusable per-job batch buffers (allocated once per job, never inside a step), one set of
// targets per model output.
struct Batcher {
  const FleetData& data;
  const ModelSpec& spec;
  const TrainSpec& train;
  const int batch;             // rows of a batch (batch_rows())
  std::vector<int> ks, steps;  // per output: features per sample, and steps (Targets::steps)
  std::vector<int64_t> idx;
  std::vector<std::vector<int32_t>> labels;
  std::vector<std::vector<float>> values;
  std::vector<Targets> targets;     // of the last load, one per output
  std::vector<float> weights;       // of the batch, when weighted (every output shares them)
  std::vector<float> class_weight;  // by class index (1 for classes the plan does not list)

  Batcher(const FleetData& d, const ModelSpec& s, const TrainSpec& ts, const Network& net)
      : data(d), spec(s), train(ts), batch(net.max_batch()) {
    const size_t outs = net.model().num_outputs();
    labels.resize(outs);
    values.resize(outs);
    targets.resize(outs);
    const size_t bs = static_cast<size_t>(batch);
    for (size_t j = 0; j < outs; ++j) {
      ks.push_back(static_cast<int>(net.output_features(j)));
      steps.push_back(net.output_steps(j));
      if (train.loss_of(j).sparse())
        labels[j].resize(bs * steps[j]);
      else
        values[j].resize(bs * ks[j]);
    }
    idx.resize(bs);
    weights.resize(bs);
    if (!spec.class_weight.empty()) {
      class_weight.assign(static_cast<size_t>(spec.class_weight.rbegin()->first) + 1, 1.0f);
      for (const auto& [c, w] : spec.class_weight) class_weight[static_cast<size_t>(c)] = w;
    }
  }
  // Loads rows idx[0..n) of xy (data.train or *data.test, with their further inputs and targets)
  // into the network inputs and the target buffers, with the rows' weights from `sample_weights`
  // (indexed by row; empty: none) or, with `by_class`, the plan's class weights; returns the
  // targets, one per output (null when the data changed under the run: `bad` says how). The
  // buffers were sized for the model: run_fleet's check_targets
  // holds every source (training and test) to that shape before anything runs.
  const Targets* load(const XY& xy, const int64_t* rows, int n, Network& net,
                      const std::vector<float>& sample_weights, bool by_class) {
    if (!load_targets(xy, rows, n, net)) return nullptr;
    const float* w = nullptr;
    if (!sample_weights.empty()) {
      for (int i = 0; i < n; ++i) weights[static_cast<size_t>(i)] = sample_weights[rows[i]];
      w = weights.data();
    } else if (by_class && !class_weight.empty()) {
      for (int i = 0; i < n; ++i) weights[static_cast<size_t>(i)] = weight_of_class(targets[0], i);
      w = weights.data();
    }
    for (Targets& t : targets) t.weights = w;
    return targets.data();
  }
  // Keras's class_weight_to_sample_weights (one output, one target per sample: run_fleet
  // refuses class_weight otherwise): the class of a sample is its label, the argmax of a one-hot
  // row, or a single target rounded half to even (np.round); classes not listed weigh 1.
  float weight_of_class(const Targets& t, int i) const {
    const int k = ks[0];
    int64_t c;
    if (t.labels) {
      c = t.labels[i];
    } else if (k == 1) {
      c = static_cast<int64_t>(std::nearbyint(t.values[i]));
    } else {
      const float* y = t.values + static_cast<size_t>(i) * k;
      c = std::max_element(y, y + k) - y;
    }
    return c >= 0 && c < static_cast<int64_t>(class_weight.size())
               ? class_weight[static_cast<size_t>(c)]
               : 1.0f;
  }
  // False (with `bad` saying why) when a gathered id or label is out of range: the data was
  // checked before the run, so only an array changed while the run reads it (a caller's memory
  // array) brings one; the job then ends as failed instead of indexing with it.
  bool load_targets(const XY& xy, const int64_t* rows, int n, Network& net) {
    const bool of_test = &xy != &data.train;
    NNFLEET_CHECK(n <= batch && net.model().num_inputs() == data.num_x() &&
                  targets.size() == data.num_y());
    for (size_t i = 0; i < data.num_x(); ++i) {
      gather_rows(data.x(i, of_test), rows, n, data.scale, net.input(i));
      const Model::IdInput* ids = net.model().id_input_of(i);
      if (ids && !ids_in_range(net.input(i), rows, n, of_test, *ids)) return false;
    }
    for (size_t j = 0; j < targets.size(); ++j) {
      const Array& y = data.y(j, of_test);
      const bool sparse = train.loss_of(j).sparse();
      NNFLEET_CHECK(sparse ? y.row_size() == steps[j] : y.row_size() == ks[j]);
      Targets t;
      if (sparse) {
        gather_labels(y, rows, n, labels[j].data());
        if (!labels_in_range(j, rows, n, of_test)) return false;
        t.labels = labels[j].data();
      } else {
        gather_rows(y, rows, n, 1.0f, values[j].data());
        t.values = values[j].data();
      }
      targets[j] = t;
    }
    return true;
  }

  // ids[n, row]: every value an integer in [0, limit) (one compare per value: the hot path).
  bool ids_in_range(const float* v, const int64_t* rows, int n, bool of_test,
                    const Model::IdInput& ids) {
    const int64_t row = data.x(ids.input, of_test).row_size(), total = row * n;
    const float limit = static_cast<float>(ids.limit);
    for (int64_t i = 0; i < total; ++i)
      if (!(v[i] >= 0 && v[i] < limit && v[i] == std::floor(v[i]))) {
        const Array& x = data.x(ids.input, of_test);
        changed(of_test, rows[i / row],
                "input value " + number(x.at(rows[i / row] * row + i % row)),
                "not an id the Embedding '" + ids.layer + "' has (integers in [0, " +
                    std::to_string(ids.limit) + "))");
        return false;
      }
    return true;
  }
  // Output j's labels[n, steps]: every one a class the model outputs.
  bool labels_in_range(size_t j, const int64_t* rows, int n, bool of_test) {
    const int32_t classes = ks[j] / steps[j];
    const int64_t total = int64_t{n} * steps[j];
    const int32_t* l = labels[j].data();
    for (int64_t i = 0; i < total; ++i)
      if (l[i] < 0 || l[i] >= classes) {
        const Array& y = data.y(j, of_test);
        changed(of_test, rows[i / steps[j]],
                "label " + number(y.at(rows[i / steps[j]] * steps[j] + i % steps[j])),
                "outside the model's classes 0.." + std::to_string(classes - 1));
        return false;
      }
    return true;
  }
  static std::string number(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
  }
  void changed(bool of_test, int64_t row, const std::string& what, const std::string& rule) {
    bad = "failed to train model '" + spec.name + "': sample " + std::to_string(row) + " of the " +
          (of_test ? "test" : "training") + " data holds " + what + ", " + rule +
          ", though every sample was checked when the run began; expected the data to stay "
          "unchanged until the run ends (an array was changed while the run read it)";
  }
  std::string bad;  // why the last load() failed
};

// The loss sum and the metrics' state over rows [begin, end) of xy, in inference mode (weighted
// by `sample_weights` when given, as Keras weighs validation data); `infer(n)` runs the network's
// forward on the first n input rows. Batches of b.batch rows, as in training. False when the data
// changed under the run (Batcher::bad).
template <typename Infer>
bool evaluate(Network& net, Batcher& b, const XY& xy, const std::vector<float>& sample_weights,
              int64_t begin, int64_t end, const JobMetrics& metrics, Infer infer, double& loss_sum,
              std::vector<double>& msums) {
  loss_sum = 0.0;
  msums.assign(metrics.state_size(), 0.0);
  const int bs = b.batch;
  const size_t outs = b.targets.size();
  std::vector<double> out_sums(outs);
  // Keras's val_loss and test loss include the regularizers, as its training loss does.
  const double weight_penalty = net.weight_penalty();
  for (int64_t r = begin; r < end; r += bs) {
    const int n = static_cast<int>(std::min<int64_t>(bs, end - r));
    std::iota(b.idx.begin(), b.idx.begin() + n, r);
    const Targets* t = b.load(xy, b.idx.data(), n, net, sample_weights, false);
    if (!t) return false;
    infer(n);
    const double loss = b.train.outputs.empty() ? net.output_loss(n, b.train.loss, t[0], nullptr)
                                                : net.output_losses(n, t, out_sums.data());
    loss_sum += loss + net.activity_penalty_sum() + n * weight_penalty;
    if (outs > 1)
      for (size_t j = 0; j < outs; ++j) metrics.add_output_loss(msums.data(), j, out_sums[j], n);
    metrics.accumulate(msums.data(), n, net, t);
  }
  return true;
}

// ReduceLROnPlateau at an epoch end, before early stopping (as when listed first in Keras's
// callbacks). A monitor the epoch did not compute changes nothing (Keras warns and skips).
void reduce_on_plateau(const ReduceLrOnPlateau& r, const EpochRecord& rec, Network& net,
                       Checkpoint& ck) {
  const double* cur = find_metric(rec.values, r.monitor);
  if (!cur) return;
  const double rate = net.train_spec().optimizer.learning_rate;
  const double next =
      plateau_epoch_end(r, monitor_goes_up(r.monitor, r.mode), *cur, rate, ck.plateau);
  if (next == rate) return;
  net.set_learning_rate(next);
  ck.learning_rate = next;
}

}  // namespace

std::shared_ptr<const Model> build_model(const ModelSpec& spec, const Shape& input_shape) {
  // load_plan gives every layer its Keras default name ("dense_1") in its config.
  // Training keys (regularizers, constraints, trainable) stay with the node (layer_training.h).
  std::vector<ModelNode> nodes;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (!spec.layers[i].call.empty()) {
      // "- call: name": the same layer again (load_plan checked that it names an earlier one).
      size_t owner = 0;
      while (owner < i && (!spec.layers[owner].call.empty() ||
                           nodes[owner].layer->name() != spec.layers[i].call))
        ++owner;
      NNFLEET_CHECK(owner < i);
      const Layer& first = *nodes[owner].layer;
      nodes.push_back(
          {make_layer(first.class_name(), first.keras_config(), ConfigMode::kKeras, first.name()),
           {static_cast<int>(i)},
           {},
           {},
           static_cast<int>(owner)});
      continue;
    }
    auto [layer, training] =
        make_layer_with_training(spec.layers[i].class_name, spec.layers[i].config,
                                 ConfigMode::kPlan, "layer_" + std::to_string(i));
    nodes.push_back({std::move(layer), {static_cast<int>(i)}, std::move(training)});
  }
  const int out = static_cast<int>(nodes.size());
  // A plan model that starts with a string layer (TextVectorization) reads strings.
  ModelInput in{"input_layer", input_shape};
  if (!nodes.empty() && dynamic_cast<const StringLayer*>(nodes[0].layer.get())) {
    in.is_string = true;
    in.string_shape = input_shape;
  }
  return std::make_shared<const Model>(spec.name, std::vector<ModelInput>{in}, std::move(nodes),
                                       std::vector<int>{out});
}

int batch_rows(const ModelSpec& spec, const FleetData& data) {
  int64_t rows = std::max(data.n_train, data.n_val);
  if (data.test) rows = std::max(rows, data.test->x.rows());
  return static_cast<int>(std::clamp<int64_t>(rows, 1, spec.batch_size));
}

int batch_pieces(const ModelSpec& spec, const Model& model, int rows) {
  if (model.mixes_samples()) return 1;
  if (spec.batch_split > 0) return std::min(spec.batch_split, rows);
  return 3.0 * model.forward_flops() * rows >= kAutoSplitFlops ? 2 : 1;
}

double estimated_cost(const ModelSpec& spec, const Model& model, int64_t n_train) {
  // 3x forward FLOPs per training sample (workloads.md), plus a per-sample overhead so that
  // FLOP-free models still order sensibly.
  return (3.0 * model.forward_flops() + 1e3) * static_cast<double>(n_train) * spec.epochs;
}

// Resolves a list (output order) or map (output names) of per-output values; `what` names them.
template <typename T>
std::vector<T> per_output(const std::vector<std::pair<std::string, T>>& given, const Model& m,
                          const T& fallback, const std::string& model, const char* what) {
  std::vector<T> out(m.num_outputs(), fallback);
  if (given.empty()) return out;
  std::string names;
  for (size_t j = 0; j < m.num_outputs(); ++j) names += (j ? ", " : "") + m.output_name(j);
  const std::string where = "failed to train model '" + model + "': ";
  if (given[0].first.empty()) {
    if (given.size() != m.num_outputs())
      throw ModelError(where + "it has " + std::to_string(m.num_outputs()) + " output" +
                       (m.num_outputs() > 1 ? "s" : "") + " (" + names + "); expected one " + what +
                       " per output, got " + std::to_string(given.size()));
    for (size_t j = 0; j < given.size(); ++j) out[j] = given[j].second;
    return out;
  }
  for (const auto& [name, v] : given) {
    size_t j = 0;
    while (j < m.num_outputs() && m.output_name(j) != name) ++j;
    if (j == m.num_outputs())
      throw ModelError(where + "its " + what + " names output '" + name +
                       "', which it does not have; expected one of " + names);
    out[j] = v;
  }
  return out;
}

TrainSpec train_spec_of(const ModelSpec& spec, const Model& model) {
  TrainSpec t{spec.loss, spec.optimizer};
  if (model.num_outputs() == 1 && spec.output_losses.size() <= 1 && spec.loss_weights.size() <= 1) {
    if (!spec.output_losses.empty()) t.loss = spec.output_losses[0].second;
    if (!spec.loss_weights.empty() && spec.loss_weights[0].second != 1.0)
      t.outputs = {{t.loss, spec.loss_weights[0].second}};
    return t;
  }
  const auto losses = per_output(spec.output_losses, model, spec.loss, spec.name, "loss");
  const auto weights = per_output(spec.loss_weights, model, 1.0, spec.name, "loss weight");
  for (size_t j = 0; j < model.num_outputs(); ++j) t.outputs.push_back({losses[j], weights[j]});
  t.loss = losses[0];
  return t;
}

namespace {

// What a job is doing with the output folder when an exception arrives (JobResult::retry).
enum class Io { kNone, kReading, kWriting };

// The job's TrainSpec: the plan's, with restore_optimizer the file's optimizer.
TrainSpec job_train_spec(const ModelSpec& spec, const Model& model, const JobContext& ctx) {
  TrainSpec train = train_spec_of(spec, model);
  if (ctx.restored_optimizer) train.optimizer = ctx.restored_optimizer->spec;
  return train;
}

// One job's training, Keras's fit() in steps: prepare() (a checkpoint resumed, or the weights
// initialized), run_epochs() (each epoch's batches, its record with the validation figures,
// ReduceLROnPlateau, early stopping and the checkpoint policy), then finish() (final and test
// figures, the best epoch, the saved model). Outcomes other than done are written into the
// JobResult as they happen; exceptions are left to run_job.
class JobRun {
 public:
  JobRun(const ModelSpec& spec, std::shared_ptr<const Model> model, const FleetData& data,
         const JobContext& ctx, JobResult& res, Io& io)
      : spec_(spec),
        data_(data),
        ctx_(ctx),
        res_(res),
        io_(io),
        model_(std::move(model)),
        train_(job_train_spec(spec, *model_, ctx)),
        batch_(batch_rows(spec, data)),
        net_(model_, batch_, train_, batch_pieces(spec, *model_, batch_)),
        metrics_(spec, train_, net_),
        es_(spec.early_stopping ? &*spec.early_stopping : nullptr),
        es_max_(es_ && monitor_goes_up(es_->monitor, es_->mode)),
        batcher_(data, spec, train_, net_),
        order_(static_cast<size_t>(data.n_train)),
        batches_(static_cast<int>((data.n_train + batch_ - 1) / batch_)) {}

  // Resumes from ctx.checkpoint_path when it holds a checkpoint; otherwise initializes the
  // weights (`initial_params`, when not null, replaces the initializer). Throws FileError.
  void prepare(const std::vector<float>* initial_params) {
    ck_.model = spec_.name;
    io_ = Io::kReading;
    const bool resumed = !ctx_.checkpoint_path.empty() && ctx_.checkpoint_may_exist &&
                         load_checkpoint(ctx_.checkpoint_path, ck_);
    if (resumed) {
      if (ck_.model != spec_.name || ck_.params.size() != net_.num_params() ||
          ck_.opt_state.size() != net_.optimizer_state_floats() ||
          (ck_.batch > 0 && ck_.metric_sums.size() != metrics_.state_size()))
        throw FileError(
            "failed to resume model '" + spec_.name + "' from '" + ctx_.checkpoint_path +
            "': the checkpoint does not match the plan's model; expected " +
            std::to_string(net_.num_params()) + " parameters, got " +
            std::to_string(ck_.params.size()) + "; delete it to restart this model from scratch");
      std::copy(ck_.params.begin(), ck_.params.end(), net_.params());
      std::copy(ck_.opt_state.begin(), ck_.opt_state.end(), net_.optimizer_state());
      ck_.params = {};  // the network holds them now
      ck_.opt_state = {};
      net_.set_iterations(ck_.iterations);
      if (ck_.learning_rate > 0) net_.set_learning_rate(ck_.learning_rate);
    } else {
      Rng init(ctx_.seed, spec_.name, "init");
      net_.initialize(init);
      if (initial_params)
        std::copy(initial_params->begin(), initial_params->end(), net_.params());
      else if (needs_adapt(*model_))
        adapt_weights(data_, net_);  // Keras's adapt(), over the training rows (adapt.h)
      if (const RestoredOptimizer* ro = ctx_.restored_optimizer) {
        if (ro->state.size() != net_.optimizer_state_floats())
          throw ModelError(
              "failed to restore the optimizer of model '" + spec_.name + "': its file holds " +
              std::to_string(ro->state.size()) + " optimizer floats; expected " +
              std::to_string(net_.optimizer_state_floats()) + " for the model's trainable weights");
        std::copy(ro->state.begin(), ro->state.end(), net_.optimizer_state());
        net_.set_iterations(ro->iterations);
      }
    }
    io_ = Io::kNone;
    res_.history = ck_.history;
    if (es_ && ck_.best.monitor.empty()) ck_.best.monitor = es_->monitor;
    if (es_ && es_->restore_best_weights) ck_.best_params.resize(net_.num_params());
    stop_training_ = ck_.stopped;
    last_checkpoint_ = Clock::now();
  }

  // The epochs left; false when the job ended before its last (diverged, or cancelled by a stop).
  bool run_epochs() {
    const int end = last_epoch();
    for (int epoch = ck_.epoch; epoch < end && !stop_training_; ++epoch) {
      if (!train_epoch(epoch)) return false;
      EpochRecord rec;
      if (!epoch_record(epoch, rec)) return false;
      res_.history.push_back(rec);
      if (ctx_.observer) ctx_.observer->on_epoch(spec_, rec);
      if (spec_.reduce_lr_on_plateau)
        reduce_on_plateau(*spec_.reduce_lr_on_plateau, rec, net_, ck_);
      if (es_) early_stopping(epoch, rec);
      if (ctx_.observer && ctx_.observer->stop_model(spec_, rec)) stop_training_ = true;
      ck_.stopped = stop_training_;
      if (!checkpoint_epoch_end(epoch)) return false;
      // A test may hold the run here, mid-model, its epoch reported and checkpointed.
      if (epoch + 1 < spec_.epochs && !stop_training_)
        test_hold::reach("epoch_end", spec_.name, ctx_.stop);
    }
    return !paused_at_limit();
  }

  // After the last epoch: the final figures, the test data's, the best epoch, and the model saved.
  void finish() {
    res_.epochs = static_cast<int>(res_.history.size());
    res_.seconds = ck_.seconds;
    res_.samples_per_second =
        ck_.seconds > 0 ? static_cast<double>(ck_.samples) / ck_.seconds : 0.0;
    if (!res_.history.empty()) {
      // The figures of the epoch whose weights the model keeps (restore_best_weights: the best
      // epoch's), so that results rank models by what their files hold; the last epoch's apart.
      res_.metrics = res_.history.back().values;
      // (last_metrics stays empty otherwise: a copy per model of a 2,000-model run's results)
      if (restored_best())
        for (const EpochRecord& r : res_.history)
          if (r.epoch == ck_.best.epoch && r.epoch != res_.history.back().epoch) {
            res_.last_metrics = std::move(res_.metrics);
            res_.metrics = r.values;
          }
    }
    if (data_.test) {
      double tl = 0;
      std::vector<double> tm;
      if (!evaluate(
              net_, batcher_, *data_.test, data_.test_weights, 0, data_.test->x.rows(), metrics_,
              [this](int n) { infer(n); }, tl, tm))
        return fail_changed_data(res_.epochs);
      const double nt = static_cast<double>(data_.test->x.rows());
      res_.metrics.emplace_back("test_loss", tl / nt);
      for (size_t m = 0; m < metrics_.size(); ++m)
        res_.metrics.emplace_back("test_" + metrics_.key(m), metrics_.value(m, tm.data()));
    }
    best_epoch();
    io_ = Io::kWriting;
    // Done from here on: a save that throws makes the caller's failed result, not this one.
    res_.status = JobStatus::kDone;
    if (ctx_.save_model && (!ctx_.wants_model_file || ctx_.wants_model_file(res_)))
      ctx_.save_model(net_, spec_);
  }

 private:
  // A split batch's pieces go to the help board, where idle workers may take some.
  double train_step(int n, const Targets* t) {
    if (net_.pieces() == 1 || !ctx_.helpers) return net_.train_step(n, t);
    net_.begin_step(n, t);
    ctx_.helpers->run(net_.pieces(), train_piece_, ctx_.job);
    ctx_.helpers->run(net_.pieces(), update_piece_, ctx_.job);
    return net_.end_step();
  }
  // Evaluation (validation, test) goes through the board the same way.
  void infer(int n) {
    if (net_.pieces() == 1 || !ctx_.helpers) return net_.forward(n, false);
    net_.begin_inference(n);
    ctx_.helpers->run(net_.pieces(), infer_piece_, ctx_.job);
  }

  // The epoch the loop ends after: the spec's last, or the rung's limit (JobContext).
  int last_epoch() const {
    return ctx_.epoch_limit > 0 ? std::min(spec_.epochs, ctx_.epoch_limit) : spec_.epochs;
  }
  bool pausing() const { return ctx_.pause_at_limit && last_epoch() < spec_.epochs; }

  // After the loop: a trial that reached its rung's limit with epochs left pauses there (its
  // checkpoint written at the limit's epoch end); true when it did.
  bool paused_at_limit() {
    if (!pausing() || stop_training_ || static_cast<int>(res_.history.size()) < last_epoch())
      return false;
    res_.status = JobStatus::kCancelled;
    res_.paused = true;
    res_.message = "paused after epoch " + std::to_string(last_epoch()) + " (a rung)";
    res_.epochs = last_epoch();
    res_.seconds = ck_.seconds;
    res_.samples_per_second =
        ck_.seconds > 0 ? static_cast<double>(ck_.samples) / ck_.seconds : 0.0;
    res_.metrics = res_.history.back().values;
    return true;
  }

  // The epoch's batches (from the checkpoint's batch on a resume); false when the job ended in
  // it (diverged, or stopped: then checkpointed).
  bool train_epoch(int epoch) {
    // The epoch's order and dropout stream derive from (seed, name, epoch) only.
    std::iota(order_.begin(), order_.end(), 0);
    if (spec_.shuffle) {
      Rng sh(ctx_.seed, spec_.name, "shuffle/" + std::to_string(epoch));
      for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[sh.below(i)]);
    }
    const int first_batch = ck_.batch;
    if (first_batch == 0) {
      net_.set_rng(Rng(ctx_.seed, spec_.name, "dropout/" + std::to_string(epoch)));
      ck_.loss_sum = 0.0;
      ck_.metric_sums.assign(metrics_.state_size(), 0.0);
      ck_.seen = 0;
      ck_.epoch_seconds = 0.0;
    } else {
      net_.rng().set_state(ck_.rng);
    }
    ck_.batch = 0;
    const auto t0 = Clock::now();
    for (int b = first_batch; b < batches_; ++b)
      if (!train_batch(epoch, b, t0)) return false;
    const double train_seconds = since(t0);
    ck_.epoch_seconds += train_seconds;
    ck_.seconds += train_seconds;
    return true;
  }

  // Batch b of the epoch that began (or resumed) at t0; false when the job ended at it.
  bool train_batch(int epoch, int b, Clock::time_point t0) {
    const int bs = batch_;
    const int n = static_cast<int>(std::min<int64_t>(bs, data_.n_train - int64_t{b} * bs));
    const Targets* t = batcher_.load(data_.train, order_.data() + int64_t{b} * bs, n, net_,
                                     data_.train_weights, true);
    if (!t) {
      ck_.seconds += since(t0);
      fail_changed_data(epoch);
      return false;
    }
    const double loss = train_step(n, t);
    if (!std::isfinite(loss)) {
      res_.status = JobStatus::kDiverged;
      res_.message = std::string("loss became ") + (std::isnan(loss) ? "nan" : "infinite") +
                     " at epoch " + std::to_string(epoch + 1) + ", batch " + std::to_string(b + 1);
      res_.epochs = epoch;
      res_.seconds = ck_.seconds + since(t0);
      return false;
    }
    ck_.loss_sum += loss * n;
    ck_.seen += n;
    if (model_->num_outputs() > 1)
      for (size_t j = 0; j < model_->num_outputs(); ++j) {
        const float* l = net_.step_losses(j);
        metrics_.add_output_loss(ck_.metric_sums.data(), j, std::accumulate(l, l + n, 0.0), n);
      }
    metrics_.accumulate(ck_.metric_sums.data(), n, net_, t);
    ck_.samples += n;
    if (ctx_.observer) {
      const double el = ck_.epoch_seconds + since(t0);
      ctx_.observer->on_batch(spec_, epoch + 1, b + 1, batches_, ck_.loss_sum / ck_.seen,
                              metrics_.empty() ? NAN : metrics_.value(0, ck_.metric_sums.data()),
                              el > 0 ? ck_.seen / el : 0.0);
    }
    if (stop_requested() && b + 1 < batches_) {
      ck_.epoch_seconds += since(t0);
      ck_.seconds += since(t0);
      write_checkpoint(epoch, b + 1);
      res_.status = JobStatus::kCancelled;
      res_.message = "stopped at epoch " + std::to_string(epoch + 1) + ", batch " +
                     std::to_string(b + 1) + "; resume with --resume";
      res_.epochs = epoch;
      res_.seconds = ck_.seconds;
      return false;
    }
    return true;
  }

  bool stop_requested() const {
    return (ctx_.stop && ctx_.stop->load(std::memory_order_relaxed)) ||
           (ctx_.caller_stop && ctx_.caller_stop->load(std::memory_order_relaxed));
  }

  // The job ends as failed, with Batcher::bad, after `epochs` complete epochs.
  void fail_changed_data(int epochs) {
    res_.status = JobStatus::kFailed;
    res_.message = batcher_.bad;
    res_.epochs = epochs;
    res_.seconds = ck_.seconds;
  }

  // The epoch's history record in `rec`: training figures, then the validation split's; false
  // when the job ended in it (the data changed under the run).
  bool epoch_record(int epoch, EpochRecord& rec) {
    rec.epoch = epoch + 1;
    rec.values.emplace_back("loss", ck_.loss_sum / ck_.seen);
    for (size_t m = 0; m < metrics_.size(); ++m)
      rec.values.emplace_back(metrics_.key(m), metrics_.value(m, ck_.metric_sums.data()));
    if (data_.n_val > 0) {
      double vl = 0;
      std::vector<double> vm;
      if (!evaluate(
              net_, batcher_, data_.train, data_.train_weights, data_.n_train,
              data_.n_train + data_.n_val, metrics_, [this](int n) { infer(n); }, vl, vm)) {
        fail_changed_data(epoch);
        return false;
      }
      const double nv = static_cast<double>(data_.n_val);
      rec.values.emplace_back("val_loss", vl / nv);
      for (size_t m = 0; m < metrics_.size(); ++m)
        rec.values.emplace_back("val_" + metrics_.key(m), metrics_.value(m, vm.data()));
    }
    // The rate the next update would use, as Keras's optimizer.learning_rate reports it (with
    // ReduceLROnPlateau: the rate of this epoch, logged before any reduction, as Keras does).
    if (spec_.optimizer.schedule || spec_.reduce_lr_on_plateau)
      rec.values.emplace_back("learning_rate",
                              learning_rate_at(net_.train_spec().optimizer, net_.iterations()));
    rec.seconds = ck_.epoch_seconds;
    return true;
  }

  // Keras's EarlyStopping.on_epoch_end.
  void early_stopping(int epoch, const EpochRecord& rec) {
    const double* cur = find_metric(rec.values, es_->monitor);
    if (!cur || epoch + 1 <= es_->start_from_epoch) return;
    if (es_->restore_best_weights && !ck_.has_best_params) {
      std::copy(net_.params(), net_.params() + net_.num_params(), ck_.best_params.begin());
      ck_.has_best_params = true;
    }
    ++ck_.wait;
    const bool better = ck_.best.epoch == 0 || (es_max_ ? *cur - es_->min_delta > ck_.best.value
                                                        : *cur + es_->min_delta < ck_.best.value);
    if (better) {
      ck_.best.epoch = epoch + 1;
      ck_.best.value = *cur;
      ck_.wait = 0;
      if (es_->restore_best_weights)
        std::copy(net_.params(), net_.params() + net_.num_params(), ck_.best_params.begin());
    } else if (ck_.wait >= es_->patience && epoch > 0) {
      stop_training_ = true;
      if (es_->restore_best_weights && ck_.has_best_params)
        std::copy(ck_.best_params.begin(), ck_.best_params.end(), net_.params());
    }
  }

  // The checkpoint policy at an epoch's end: a checkpoint when early stopping ended training (a
  // resume must not train further), when a stop is requested, or when ctx.checkpoint_seconds
  // have passed since the last one: a model whose epochs take milliseconds is not slowed by a
  // file per epoch, and a crash costs at most that much retraining (a resume from any checkpoint
  // gives the same result). False when a stop ends the job here.
  bool checkpoint_epoch_end(int epoch) {
    const bool stop_requested = this->stop_requested();
    const bool rung_end = pausing() && epoch + 1 == last_epoch();
    if (stop_training_ || stop_requested || rung_end ||
        since(last_checkpoint_) >= ctx_.checkpoint_seconds) {
      write_checkpoint(epoch + 1, 0);
      last_checkpoint_ = Clock::now();
    }
    if (stop_requested && epoch + 1 < last_epoch() && !stop_training_) {
      res_.status = JobStatus::kCancelled;
      res_.message = "stopped after epoch " + std::to_string(epoch + 1) + "; resume with --resume";
      res_.epochs = epoch + 1;
      res_.seconds = ck_.seconds;
      return false;
    }
    return true;
  }

  void write_checkpoint(int epoch, int batch) {
    if (ctx_.checkpoint_path.empty()) return;
    ck_.epoch = epoch;
    ck_.batch = batch;
    ck_.iterations = net_.iterations();
    ck_.rng = net_.rng().state();
    ck_.history = res_.history;
    io_ = Io::kWriting;
    save_checkpoint(ctx_.checkpoint_path, ck_, {net_.params(), net_.num_params()},
                    {net_.optimizer_state(), net_.optimizer_state_floats()});
    res_.checkpointed = true;
    io_ = Io::kNone;
  }

  // Whether early stopping ended training and put its best epoch's weights back (Keras's
  // EarlyStopping restores them only when it stops the training: wait reached patience).
  bool restored_best() const {
    return es_ && es_->restore_best_weights && ck_.has_best_params && ck_.best.epoch > 0 &&
           ck_.wait >= es_->patience && ck_.stopped;
  }

  // JobResult::best: early stopping's best epoch; without it, the epoch with the lowest
  // monitored loss.
  void best_epoch() {
    if (es_ && ck_.best.epoch > 0) {
      res_.best = ck_.best;
      return;
    }
    if (res_.history.empty()) return;
    const std::string mon = data_.n_val > 0 ? "val_loss" : "loss";
    res_.best.monitor = mon;
    for (const auto& r : res_.history) {
      const double* v = find_metric(r.values, mon);
      if (v && (res_.best.epoch == 0 || *v < res_.best.value)) {
        res_.best.epoch = r.epoch;
        res_.best.value = *v;
      }
    }
  }

  const ModelSpec& spec_;
  const FleetData& data_;
  const JobContext& ctx_;
  JobResult& res_;
  Io& io_;
  const std::shared_ptr<const Model> model_;
  const TrainSpec train_;
  const int batch_;  // batch_rows(): what the network and batch buffers are sized by
  Network net_;
  const std::function<void(int)> train_piece_ = [this](int p) { net_.train_piece(p); };
  const std::function<void(int)> update_piece_ = [this](int p) { net_.update_piece(p); };
  const std::function<void(int)> infer_piece_ = [this](int p) { net_.infer_piece(p); };
  const JobMetrics metrics_;
  Checkpoint ck_;
  const EarlyStopping* const es_;
  const bool es_max_;
  Batcher batcher_;
  std::vector<int64_t> order_;
  const int batches_;
  bool stop_training_ = false;
  Clock::time_point last_checkpoint_{};
};

}  // namespace

JobResult run_job(const ModelSpec& spec, std::shared_ptr<const Model> model, const FleetData& data,
                  const JobContext& ctx, const std::vector<float>* initial_params) {
  JobResult res;
  res.name = spec.name;
  res.core = ctx.core;
  res.params = model->trainable_params() + model->non_trainable_params();
  Io io = Io::kNone;
  try {
    JobRun job(spec, std::move(model), data, ctx, res, io);
    job.prepare(initial_params);
    if (job.run_epochs()) job.finish();
  } catch (const std::bad_alloc&) {
    // The arena's refusal is a ModelError with its bytes; this is any other allocation.
    res.status = JobStatus::kFailed;
    res.message = "failed to train model '" + spec.name +
                  "': out of memory; expected room for its batch buffers and checkpoint at batch " +
                  std::to_string(batch_rows(spec, data)) + ", got an allocation refused" +
                  "\nhint: lower batch_size, use fewer workers, or free some memory";
  } catch (const std::exception& e) {
    res.status = JobStatus::kFailed;
    res.message = e.what();
    // The epochs it did train (a failed write after the last one still trained them all).
    res.epochs = static_cast<int>(res.history.size());
    if (res.seconds == 0)
      for (const EpochRecord& r : res.history) res.seconds += r.seconds;
    res.retry = io != Io::kNone;
    res.write_failed = io == Io::kWriting;
  }
  return res;
}

}  // namespace nnfleet
