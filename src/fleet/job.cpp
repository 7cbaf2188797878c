// Job: the training loop of one model.
#include "fleet/job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "fleet/checkpoint.h"
#include "fleet/lr_plateau.h"
#include "layers/registry.h"

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
  std::vector<int> ks, steps;  // per output: features per sample, and steps (Targets::steps)
  std::vector<int64_t> idx;
  std::vector<std::vector<int32_t>> labels;
  std::vector<std::vector<float>> values;
  std::vector<Targets> targets;     // of the last load, one per output
  std::vector<float> weights;       // of the batch, when weighted (every output shares them)
  std::vector<float> class_weight;  // by class index (1 for classes the plan does not list)

  Batcher(const FleetData& d, const ModelSpec& s, const TrainSpec& ts, const Network& net)
      : data(d), spec(s), train(ts) {
    const size_t outs = net.model().num_outputs();
    labels.resize(outs);
    values.resize(outs);
    targets.resize(outs);
    const size_t bs = static_cast<size_t>(spec.batch_size);
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
  // targets, one per output. The buffers were sized for the model: run_fleet's check_targets
  // holds every source (training and test) to that shape before anything runs.
  const Targets* load(const XY& xy, const int64_t* rows, int n, Network& net,
                      const std::vector<float>& sample_weights, bool by_class) {
    load_targets(xy, rows, n, net);
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
  void load_targets(const XY& xy, const int64_t* rows, int n, Network& net) {
    const bool of_test = &xy != &data.train;
    NNFLEET_CHECK(n <= spec.batch_size && net.model().num_inputs() == data.num_x() &&
                  targets.size() == data.num_y());
    for (size_t i = 0; i < data.num_x(); ++i)
      gather_rows(data.x(i, of_test), rows, n, data.scale, net.input(i));
    for (size_t j = 0; j < targets.size(); ++j) {
      const Array& y = data.y(j, of_test);
      const bool sparse = train.loss_of(j).sparse();
      NNFLEET_CHECK(sparse ? y.row_size() == steps[j] : y.row_size() == ks[j]);
      Targets t;
      if (sparse) {
        gather_labels(y, rows, n, labels[j].data());
        t.labels = labels[j].data();
      } else {
        gather_rows(y, rows, n, 1.0f, values[j].data());
        t.values = values[j].data();
      }
      targets[j] = t;
    }
  }
};

// The loss sum and the metrics' state over rows [begin, end) of xy, in inference mode (weighted
// by `sample_weights` when given, as Keras weighs validation data); `infer(n)` runs the network's
// forward on the first n input rows.
template <typename Infer>
void evaluate(Network& net, Batcher& b, const XY& xy, const std::vector<float>& sample_weights,
              int64_t begin, int64_t end, const JobMetrics& metrics, const ModelSpec& spec,
              Infer infer, double& loss_sum, std::vector<double>& msums) {
  loss_sum = 0.0;
  msums.assign(metrics.state_size(), 0.0);
  const int bs = spec.batch_size;
  const size_t outs = b.targets.size();
  std::vector<double> out_sums(outs);
  // Keras's val_loss and test loss include the regularizers, as its training loss does.
  const double weight_penalty = net.weight_penalty();
  for (int64_t r = begin; r < end; r += bs) {
    const int n = static_cast<int>(std::min<int64_t>(bs, end - r));
    std::iota(b.idx.begin(), b.idx.begin() + n, r);
    const Targets* t = b.load(xy, b.idx.data(), n, net, sample_weights, false);
    infer(n);
    const double loss = b.train.outputs.empty() ? net.output_loss(n, b.train.loss, t[0], nullptr)
                                                : net.output_losses(n, t, out_sums.data());
    loss_sum += loss + net.activity_penalty_sum() + n * weight_penalty;
    if (outs > 1)
      for (size_t j = 0; j < outs; ++j) metrics.add_output_loss(msums.data(), j, out_sums[j], n);
    metrics.accumulate(msums.data(), n, net, t);
  }
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

const char* job_status_name(JobStatus s) {
  switch (s) {
    case JobStatus::kPending:
      return "pending";
    case JobStatus::kDone:
      return "done";
    case JobStatus::kDiverged:
      return "diverged";
    case JobStatus::kFailed:
      return "failed";
    case JobStatus::kCancelled:
      return "cancelled";
  }
  return "pending";
}

JobStatus job_status_from_name(const std::string& s) {
  for (JobStatus st :
       {JobStatus::kDone, JobStatus::kDiverged, JobStatus::kFailed, JobStatus::kCancelled})
    if (s == job_status_name(st)) return st;
  return JobStatus::kPending;
}

const double* find_metric(const Metrics& m, const std::string& key) {
  for (const auto& [k, v] : m)
    if (k == key) return &v;
  return nullptr;
}

std::shared_ptr<const Model> build_model(const ModelSpec& spec, const Shape& input_shape) {
  // load_plan gives every layer its Keras default name ("dense_1") in its config.
  // Training keys (regularizers, constraints, trainable) stay with the node (layer_training.h).
  std::vector<ModelNode> nodes;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    auto [layer, training] = make_layer_with_training(
        spec.layers[i].class_name, spec.layers[i].config, ConfigMode::kPlan,
        "layer_" + std::to_string(i));
    nodes.push_back({std::move(layer), {static_cast<int>(i)}, std::move(training)});
  }
  const int out = static_cast<int>(nodes.size());
  return std::make_shared<const Model>(spec.name, input_shape, std::move(nodes), out);
}

int batch_pieces(const ModelSpec& spec, const Model& model) {
  if (model.mixes_samples()) return 1;
  if (spec.batch_split > 0) return std::min(spec.batch_split, spec.batch_size);
  return 3.0 * model.forward_flops() * spec.batch_size >= kAutoSplitFlops ? 2 : 1;
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
                       (m.num_outputs() > 1 ? "s" : "") + " (" + names + "); expected one " +
                       what + " per output, got " + std::to_string(given.size()));
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

JobResult run_job(const ModelSpec& spec, std::shared_ptr<const Model> model, const FleetData& data,
                  const JobContext& ctx, const std::vector<float>* initial_params) {
  JobResult res;
  res.name = spec.name;
  res.core = ctx.core;
  res.params = model->trainable_params() + model->non_trainable_params();
  // What the job is doing with the output folder when an exception arrives (JobResult::retry).
  enum class Io { kNone, kReading, kWriting } io = Io::kNone;
  try {
    TrainSpec train = train_spec_of(spec, *model);
    if (ctx.restored_optimizer) train.optimizer = ctx.restored_optimizer->spec;
    Network net(model, spec.batch_size, train, batch_pieces(spec, *model));
    // A split batch's pieces go to the help board, where idle workers may take some.
    const std::function<void(int)> train_piece = [&net](int p) { net.train_piece(p); };
    const std::function<void(int)> update_piece = [&net](int p) { net.update_piece(p); };
    const std::function<void(int)> infer_piece = [&net](int p) { net.infer_piece(p); };
    auto train_step = [&](int n, const Targets* t) {
      if (net.pieces() == 1 || !ctx.helpers) return net.train_step(n, t);
      net.begin_step(n, t);
      ctx.helpers->run(net.pieces(), train_piece, ctx.job);
      ctx.helpers->run(net.pieces(), update_piece, ctx.job);
      return net.end_step();
    };
    // Evaluation (validation, test) goes through the board the same way.
    auto infer = [&](int n) {
      if (net.pieces() == 1 || !ctx.helpers) return net.forward(n, false);
      net.begin_inference(n);
      ctx.helpers->run(net.pieces(), infer_piece, ctx.job);
    };
    const JobMetrics metrics(spec, train, net);

    Checkpoint ck;
    ck.model = spec.name;
    io = Io::kReading;
    const bool resumed = !ctx.checkpoint_path.empty() && load_checkpoint(ctx.checkpoint_path, ck);
    if (resumed) {
      if (ck.model != spec.name || ck.params.size() != net.num_params() ||
          ck.opt_state.size() != net.optimizer_state_floats() ||
          (ck.batch > 0 && ck.metric_sums.size() != metrics.state_size()))
        throw FileError("failed to resume model '" + spec.name + "' from '" + ctx.checkpoint_path +
                        "': the checkpoint does not match the plan's model; expected " +
                        std::to_string(net.num_params()) + " parameters, got " +
                        std::to_string(ck.params.size()) +
                        "; delete it to restart this model from scratch");
      std::copy(ck.params.begin(), ck.params.end(), net.params());
      std::copy(ck.opt_state.begin(), ck.opt_state.end(), net.optimizer_state());
      ck.params = {};  // the network holds them now
      ck.opt_state = {};
      net.set_iterations(ck.iterations);
      if (ck.learning_rate > 0) net.set_learning_rate(ck.learning_rate);
    } else {
      Rng init(ctx.seed, spec.name, "init");
      net.initialize(init);
      if (initial_params) std::copy(initial_params->begin(), initial_params->end(), net.params());
      if (const RestoredOptimizer* ro = ctx.restored_optimizer) {
        if (ro->state.size() != net.optimizer_state_floats())
          throw ModelError("failed to restore the optimizer of model '" + spec.name +
                           "': its file holds " + std::to_string(ro->state.size()) +
                           " optimizer floats; expected " +
                           std::to_string(net.optimizer_state_floats()) +
                           " for the model's trainable weights");
        std::copy(ro->state.begin(), ro->state.end(), net.optimizer_state());
        net.set_iterations(ro->iterations);
      }
    }
    io = Io::kNone;
    res.history = ck.history;

    const EarlyStopping* es = spec.early_stopping ? &*spec.early_stopping : nullptr;
    const bool es_max = es && monitor_goes_up(es->monitor, es->mode);
    if (es && ck.best.monitor.empty()) ck.best.monitor = es->monitor;
    if (es && es->restore_best_weights) ck.best_params.resize(net.num_params());

    Batcher batcher(data, spec, train, net);
    std::vector<int64_t> order(static_cast<size_t>(data.n_train));
    const int bs = spec.batch_size;
    const int batches = static_cast<int>((data.n_train + bs - 1) / bs);
    bool stop_training = ck.stopped;
    auto last_checkpoint = Clock::now();

    auto write_checkpoint = [&](int epoch, int batch) {
      if (ctx.checkpoint_path.empty()) return;
      ck.epoch = epoch;
      ck.batch = batch;
      ck.iterations = net.iterations();
      ck.rng = net.rng().state();
      ck.history = res.history;
      io = Io::kWriting;
      save_checkpoint(ctx.checkpoint_path, ck, {net.params(), net.num_params()},
                      {net.optimizer_state(), net.optimizer_state_floats()});
      io = Io::kNone;
    };

    for (int epoch = ck.epoch; epoch < spec.epochs && !stop_training; ++epoch) {
      // The epoch's order and dropout stream derive from (seed, name, epoch) only.
      std::iota(order.begin(), order.end(), 0);
      if (spec.shuffle) {
        Rng sh(ctx.seed, spec.name, "shuffle/" + std::to_string(epoch));
        for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[sh.below(i)]);
      }
      const int first_batch = ck.batch;
      if (first_batch == 0) {
        net.set_rng(Rng(ctx.seed, spec.name, "dropout/" + std::to_string(epoch)));
        ck.loss_sum = 0.0;
        ck.metric_sums.assign(metrics.state_size(), 0.0);
        ck.seen = 0;
        ck.epoch_seconds = 0.0;
      } else {
        net.rng().set_state(ck.rng);
      }
      ck.batch = 0;
      const auto t0 = Clock::now();
      for (int b = first_batch; b < batches; ++b) {
        const int n = static_cast<int>(std::min<int64_t>(bs, data.n_train - int64_t{b} * bs));
        const Targets* t = batcher.load(data.train, order.data() + int64_t{b} * bs, n, net,
                                        data.train_weights, true);
        const double loss = train_step(n, t);
        if (!std::isfinite(loss)) {
          res.status = JobStatus::kDiverged;
          res.message = std::string("loss became ") + (std::isnan(loss) ? "nan" : "infinite") +
                        " at epoch " + std::to_string(epoch + 1) + ", batch " +
                        std::to_string(b + 1);
          res.epochs = epoch;
          res.seconds = ck.seconds + since(t0);
          return res;
        }
        ck.loss_sum += loss * n;
        ck.seen += n;
        if (model->num_outputs() > 1)
          for (size_t j = 0; j < model->num_outputs(); ++j) {
            const float* l = net.step_losses(j);
            metrics.add_output_loss(ck.metric_sums.data(), j, std::accumulate(l, l + n, 0.0), n);
          }
        metrics.accumulate(ck.metric_sums.data(), n, net, t);
        ck.samples += n;
        if (ctx.observer) {
          const double el = ck.epoch_seconds + since(t0);
          ctx.observer->on_batch(spec, epoch + 1, b + 1, batches, ck.loss_sum / ck.seen,
                                 metrics.empty() ? NAN : metrics.value(0, ck.metric_sums.data()),
                                 el > 0 ? ck.seen / el : 0.0);
        }
        if (ctx.stop && ctx.stop->load(std::memory_order_relaxed) && b + 1 < batches) {
          ck.epoch_seconds += since(t0);
          ck.seconds += since(t0);
          write_checkpoint(epoch, b + 1);
          res.status = JobStatus::kCancelled;
          res.message = "stopped at epoch " + std::to_string(epoch + 1) + ", batch " +
                        std::to_string(b + 1) + "; resume with --resume";
          res.epochs = epoch;
          res.seconds = ck.seconds;
          return res;
        }
      }
      const double train_seconds = since(t0);
      ck.epoch_seconds += train_seconds;
      ck.seconds += train_seconds;

      EpochRecord rec;
      rec.epoch = epoch + 1;
      rec.values.emplace_back("loss", ck.loss_sum / ck.seen);
      for (size_t m = 0; m < metrics.size(); ++m)
        rec.values.emplace_back(metrics.key(m), metrics.value(m, ck.metric_sums.data()));
      if (data.n_val > 0) {
        double vl = 0;
        std::vector<double> vm;
        evaluate(net, batcher, data.train, data.train_weights, data.n_train,
                 data.n_train + data.n_val, metrics, spec, infer, vl, vm);
        const double nv = static_cast<double>(data.n_val);
        rec.values.emplace_back("val_loss", vl / nv);
        for (size_t m = 0; m < metrics.size(); ++m)
          rec.values.emplace_back("val_" + metrics.key(m), metrics.value(m, vm.data()));
      }
      // The rate the next update would use, as Keras's optimizer.learning_rate reports it (with
      // ReduceLROnPlateau: the rate of this epoch, logged before any reduction, as Keras does).
      if (spec.optimizer.schedule || spec.reduce_lr_on_plateau)
        rec.values.emplace_back("learning_rate",
                                learning_rate_at(net.train_spec().optimizer, net.iterations()));
      rec.seconds = ck.epoch_seconds;
      res.history.push_back(rec);
      if (ctx.observer) ctx.observer->on_epoch(spec, rec);
      if (spec.reduce_lr_on_plateau) reduce_on_plateau(*spec.reduce_lr_on_plateau, rec, net, ck);

      if (es) {
        // Keras's EarlyStopping.on_epoch_end.
        if (const double* cur = find_metric(rec.values, es->monitor);
            cur && epoch + 1 > es->start_from_epoch) {
          if (es->restore_best_weights && !ck.has_best_params) {
            std::copy(net.params(), net.params() + net.num_params(), ck.best_params.begin());
            ck.has_best_params = true;
          }
          ++ck.wait;
          const bool better = ck.best.epoch == 0 || (es_max ? *cur - es->min_delta > ck.best.value
                                                            : *cur + es->min_delta < ck.best.value);
          if (better) {
            ck.best.epoch = epoch + 1;
            ck.best.value = *cur;
            ck.wait = 0;
            if (es->restore_best_weights)
              std::copy(net.params(), net.params() + net.num_params(), ck.best_params.begin());
          } else if (ck.wait >= es->patience && epoch > 0) {
            stop_training = true;
            if (es->restore_best_weights && ck.has_best_params)
              std::copy(ck.best_params.begin(), ck.best_params.end(), net.params());
          }
        }
      }
      ck.stopped = stop_training;
      // A checkpoint at the end of an epoch when early stopping ended training (a resume must
      // not train further), when a stop is requested, or when ctx.checkpoint_seconds have passed
      // since the last one: a model whose epochs take milliseconds is not slowed by a file per
      // epoch, and a crash costs at most that much retraining (a resume from any checkpoint
      // gives the same result).
      const bool stop_requested = ctx.stop && ctx.stop->load(std::memory_order_relaxed);
      if (stop_training || stop_requested || since(last_checkpoint) >= ctx.checkpoint_seconds) {
        write_checkpoint(epoch + 1, 0);
        last_checkpoint = Clock::now();
      }
      if (stop_requested && epoch + 1 < spec.epochs && !stop_training) {
        res.status = JobStatus::kCancelled;
        res.message = "stopped after epoch " + std::to_string(epoch + 1) + "; resume with --resume";
        res.epochs = epoch + 1;
        res.seconds = ck.seconds;
        return res;
      }
    }

    res.epochs = static_cast<int>(res.history.size());
    res.seconds = ck.seconds;
    res.samples_per_second = ck.seconds > 0 ? static_cast<double>(ck.samples) / ck.seconds : 0.0;
    if (!res.history.empty()) res.metrics = res.history.back().values;
    if (data.test) {
      double tl = 0;
      std::vector<double> tm;
      evaluate(net, batcher, *data.test, data.test_weights, 0, data.test->x.rows(), metrics, spec,
               infer, tl, tm);
      const double nt = static_cast<double>(data.test->x.rows());
      res.metrics.emplace_back("test_loss", tl / nt);
      for (size_t m = 0; m < metrics.size(); ++m)
        res.metrics.emplace_back("test_" + metrics.key(m), metrics.value(m, tm.data()));
    }
    if (es && ck.best.epoch > 0) {
      res.best = ck.best;
    } else if (!res.history.empty()) {
      // Without early stopping, "best" reports the epoch with the lowest monitored loss.
      const std::string mon = data.n_val > 0 ? "val_loss" : "loss";
      res.best.monitor = mon;
      for (const auto& r : res.history) {
        const double* v = find_metric(r.values, mon);
        if (v && (res.best.epoch == 0 || *v < res.best.value)) {
          res.best.epoch = r.epoch;
          res.best.value = *v;
        }
      }
    }
    io = Io::kWriting;
    if (ctx.save_model) ctx.save_model(net, spec);
    res.status = JobStatus::kDone;
  } catch (const std::exception& e) {
    res.status = JobStatus::kFailed;
    res.message = e.what();
    res.retry = io != Io::kNone;
    res.write_failed = io == Io::kWriting;
  }
  return res;
}

}  // namespace nnfleet
