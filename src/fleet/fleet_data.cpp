// Loading a plan's data sources.
#include "fleet/fleet_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace nnfleet {

std::string describe_source(const DataSource& s) {
  switch (s.kind) {
    case DataSource::Kind::kFashionMnist:
      return "fashion-mnist:" + s.split;
    case DataSource::Kind::kCsv:
    case DataSource::Kind::kNpz:
      return "'" + s.file + "'";
    case DataSource::Kind::kArrays:
      return "{array: " + s.x + "} and {array: " + s.y + "}";
    default:
      return "'" + s.x + "' and '" + s.y + "'";
  }
}

const Array& given_array(const GivenArrays* arrays, const std::string& key) {
  if (arrays) {
    const auto it = arrays->find(key);
    if (it != arrays->end()) return it->second;
  }
  std::string given;
  if (arrays)
    for (const auto& [k, v] : *arrays) given += (given.empty() ? "" : ", ") + k;
  throw DataError("failed to read data {array: " + key +
                  "}: no array of that name was given; expected one of: " +
                  (given.empty() ? std::string("(none)") : given));
}

XY load_source(const DataSource& s, const GivenArrays* arrays) {
  XY d;
  switch (s.kind) {
    case DataSource::Kind::kFashionMnist:
      return load_fashion_mnist(s.split);
    case DataSource::Kind::kNpy:
      d.x = load_npy(s.x);
      d.y = load_npy(s.y);
      break;
    case DataSource::Kind::kArrays:
      d.x = given_array(arrays, s.x);
      d.y = given_array(arrays, s.y);
      break;
    case DataSource::Kind::kNpz:
      d.x = load_npz(s.file, s.x);
      d.y = load_npz(s.file, s.y);
      break;
    case DataSource::Kind::kIdx:
      d.x = load_idx(s.x);
      d.y = load_idx(s.y);
      break;
    case DataSource::Kind::kCsv: {
      CsvData c = load_csv(s.file, s.label);
      d.x = c.x;
      d.y = c.y;
      break;
    }
  }
  const std::string what = describe_source(s);
  if (d.x.shape().rank() < 2 && d.x.dtype() != DType::kStr)  // text: one string per sample
    throw DataError("failed to load data " + what +
                    ": x must have a sample axis and features; "
                    "expected rank >= 2, got shape " +
                    d.x.shape().str());
  if (d.x.rows() != d.y.rows())
    throw DataError("failed to load data " + what +
                    ": x and y disagree on the number of samples; "
                    "expected equal first dimensions, got " +
                    d.x.shape().str() + " and " + d.y.shape().str());
  if (d.x.rows() == 0)
    throw DataError("failed to load data " + what + ": no samples; expected at least one row");
  return d;
}

namespace {

// Refuses NaN and infinities in a float array: in x they only show up later as a "diverged"
// model, in y they make every loss NaN.
void check_finite(const Array& a, const std::string& source, const char* which) {
  if (a.dtype() == DType::kStr) return;  // text for a string input
  if (a.dtype() != DType::kF32 && a.dtype() != DType::kF64) return;
  const int64_t n = a.shape().size(), row = a.row_size();
  for (int64_t i = 0; i < n; ++i) {
    const double v = a.at(i);
    if (std::isfinite(v)) continue;
    throw DataError("failed to load data " + source + ": " + which + " holds a non-finite value (" +
                    (std::isnan(v) ? "NaN"
                     : v > 0       ? "inf"
                                   : "-inf") +
                    ") at row " + std::to_string(i / row) + ", element " + std::to_string(i % row) +
                    "; expected finite numbers");
  }
}

LabelStats label_stats(const Array& y) {
  LabelStats st;
  st.min = st.max = y.at(0);
  const int64_t n = y.shape().size();
  for (int64_t i = 0; i < n; ++i) {
    const double v = y.at(i);
    if (v != std::floor(v)) st.integral = false;
    st.min = std::min(st.min, v);
    st.max = std::max(st.max, v);
  }
  return st;
}

// Loads one source and checks it holds only finite numbers.
XY load_checked(const DataSource& s, const GivenArrays* arrays) {
  XY d = load_source(s, arrays);
  const std::string what = describe_source(s);
  check_finite(d.x, what, "x");
  check_finite(d.y, what, "y");
  return d;
}

// The second and later inputs and targets of a source, each with the first's rows and only
// finite numbers.
FleetData::More load_more(const DataSource& s, const XY& first, const GivenArrays* arrays) {
  FleetData::More m;
  const std::string what = describe_source(s);
  auto one = [&](const std::string& name, const Array& like, const char* which, int k) {
    Array a = s.kind == DataSource::Kind::kNpz      ? load_npz(s.file, name)
              : s.kind == DataSource::Kind::kArrays ? given_array(arrays, name)
                                                    : load_npy(name);
    const std::string label = std::string(which) + "[" + std::to_string(k) + "] ('" + name + "')";
    if (a.shape().rank() < 1 || a.rows() != like.rows())
      throw DataError("failed to load data " + what + ": " + label + " has " +
                      (a.shape().rank() < 1 ? std::string("no sample axis")
                                            : std::to_string(a.rows()) + " samples") +
                      "; expected " + std::to_string(like.rows()) + ", as " + which + "[0]");
    check_finite(a, what, which);
    return a;
  };
  for (size_t i = 0; i < s.more_x.size(); ++i)
    m.x.push_back(one(s.more_x[i], first.x, "x", static_cast<int>(i + 1)));
  for (size_t i = 0; i < s.more_y.size(); ++i)
    m.y.push_back(one(s.more_y[i], first.y, "y", static_cast<int>(i + 1)));
  return m;
}

// The sample weights of source `s` for its `rows` samples: one finite, non-negative number per
// sample ([N] or [N, 1]), as float32.
std::vector<float> load_sample_weights(const DataSource& s, int64_t rows,
                                       const GivenArrays* arrays) {
  if (s.sample_weight.empty()) return {};
  const Array w = s.kind == DataSource::Kind::kNpz      ? load_npz(s.file, s.sample_weight)
                  : s.kind == DataSource::Kind::kArrays ? given_array(arrays, s.sample_weight)
                                                        : load_npy(s.sample_weight);
  const std::string what =
      "failed to load sample weights " +
      (s.kind == DataSource::Kind::kNpz      ? "'" + s.file + "' (key '" + s.sample_weight + "')"
       : s.kind == DataSource::Kind::kArrays ? "{array: " + s.sample_weight + "}"
                                             : "'" + s.sample_weight + "'");
  if (w.shape().rank() < 1 || w.shape().rank() > 2 || (w.shape().rank() == 2 && w.shape()[1] != 1))
    throw DataError(what + ": one weight per sample; expected shape [" + std::to_string(rows) +
                    "] or [" + std::to_string(rows) + ", 1], got " + w.shape().str());
  if (w.rows() != rows)
    throw DataError(what + ": one weight per sample; expected " + std::to_string(rows) +
                    " weights (the rows of x), got " + std::to_string(w.rows()));
  std::vector<float> out(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    const double v = w.at(i);
    if (!std::isfinite(v) || v < 0) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", v);
      throw DataError(what + ": bad weight at sample " + std::to_string(i) +
                      "; expected a finite number >= 0, got " + text);
    }
    out[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  return out;
}

}  // namespace

namespace {

// Keras's validation_data: the rows of `spec.validation` appended after the first `rows` of
// train, with n_val their count, so that every model validates on them exactly as on
// validation_split's part (evaluated after each epoch, never batched for training). Costs one
// copy of train while it runs.
void append_validation(const DataSpec& spec, const GivenArrays* arrays, int64_t rows,
                       FleetData& f) {
  const DataSource& vs = *spec.validation;
  const XY v = load_checked(vs, arrays);
  const FleetData::More vm = load_more(vs, v, arrays);
  const std::string what = describe_source(vs) + " (validation)";
  if (vm.x.size() != f.more.x.size() || vm.y.size() != f.more.y.size())
    throw DataError("failed to load data " + what + ": it has " + std::to_string(1 + vm.x.size()) +
                    " inputs and " + std::to_string(1 + vm.y.size()) + " targets; expected " +
                    std::to_string(1 + f.more.x.size()) + " and " +
                    std::to_string(1 + f.more.y.size()) + ", as train");
  std::vector<float> w = load_sample_weights(spec.train, rows, arrays);
  std::vector<float> vw = load_sample_weights(vs, v.x.rows(), arrays);
  if (!w.empty() || !vw.empty()) {  // a part without weights weighs each sample 1 (Keras)
    w.resize(static_cast<size_t>(rows), 1.0f);
    vw.resize(static_cast<size_t>(v.x.rows()), 1.0f);
    w.insert(w.end(), vw.begin(), vw.end());
  }
  f.train_weights = std::move(w);
  auto join = [&](const Array& t, const Array& a) {
    return concat_rows(t.slice_rows(0, rows), a, what);
  };
  f.train = XY{join(f.train.x, v.x), join(f.train.y, v.y)};
  for (size_t k = 0; k < vm.x.size(); ++k) f.more.x[k] = join(f.more.x[k], vm.x[k]);
  for (size_t k = 0; k < vm.y.size(); ++k) f.more.y[k] = join(f.more.y[k], vm.y[k]);
  f.n_train = rows;
  f.n_val = v.x.rows();
}

FleetData load_one(const DataSpec& spec, const GivenArrays* arrays) {
  FleetData f;
  f.train = load_checked(spec.train, arrays);
  f.train_name = describe_source(spec.train);
  f.more = load_more(spec.train, f.train, arrays);
  if (spec.test) {
    f.test = load_checked(*spec.test, arrays);
    f.test_name = describe_source(*spec.test);
    f.test_more = load_more(*spec.test, *f.test, arrays);
    if (f.test_more.x.size() != f.more.x.size() || f.test_more.y.size() != f.more.y.size())
      throw DataError("failed to load data " + f.test_name + ": test has " +
                      std::to_string(1 + f.test_more.x.size()) + " inputs and " +
                      std::to_string(1 + f.test_more.y.size()) + " targets; expected " +
                      std::to_string(1 + f.more.x.size()) + " and " +
                      std::to_string(1 + f.more.y.size()) + ", as train");
    for (size_t k = 0; k < f.more.x.size(); ++k)
      if (!(f.test_more.x[k].sample_shape() == f.more.x[k].sample_shape()))
        throw DataError("failed to load data " + f.test_name + ": test input " +
                        std::to_string(k + 1) + " has samples of shape " +
                        f.test_more.x[k].sample_shape().str() + "; expected the train shape " +
                        f.more.x[k].sample_shape().str());
    if (!(f.test->x.sample_shape() == f.train.x.sample_shape()))
      throw DataError("failed to load data " + f.test_name + ": test samples have shape " +
                      f.test->x.sample_shape().str() + "; expected the train sample shape " +
                      f.train.x.sample_shape().str());
  }
  f.scale = static_cast<float>(spec.scale);
  f.input_shape = f.train.x.sample_shape();
  f.input_shapes = {f.input_shape};
  for (const Array& a : f.more.x) f.input_shapes.push_back(a.sample_shape());
  // `take`: the first rows only (the arrays keep theirs; batches and the split never reach past).
  const int64_t rows =
      spec.take > 0 ? std::min<int64_t>(spec.take, f.train.x.rows()) : f.train.x.rows();
  // Keras: split_at = int(n * (1 - validation_split)).
  f.n_train = static_cast<int64_t>(static_cast<double>(rows) * (1.0 - spec.validation_split));
  f.n_val = rows - f.n_train;
  if (spec.validation) {
    append_validation(spec, arrays, rows, f);
  } else {
    if (spec.validation_split > 0 && (f.n_val == 0 || f.n_train == 0)) {
      char split[32];
      std::snprintf(split, sizeof split, "%g", spec.validation_split);
      throw DataError(spec.validation_split_where + ": failed to split data " + f.train_name +
                      ": validation_split " + split + " of " + std::to_string(rows) +
                      " samples leaves an empty part; expected both parts non-empty");
    }
    f.train_weights = load_sample_weights(spec.train, rows, arrays);
  }
  if (f.test) f.test_weights = load_sample_weights(*spec.test, f.test->x.rows(), arrays);
  f.train_labels = label_stats(f.train.y);
  if (f.test) f.test_labels = label_stats(f.test->y);
  for (FleetData::More* m : {&f.more, &f.test_more})
    for (const Array& y : m->y) m->y_labels.push_back(label_stats(y));
  return f;
}

}  // namespace

FleetData load_fleet_data(const DataSpec& spec, const GivenArrays* arrays) {
  if (spec.where.empty()) return load_one(spec, arrays);
  try {
    return load_one(spec, arrays);
  } catch (const DataError& e) {
    throw DataError(spec.where + ": " + e.what());
  }
}

std::vector<FleetData> load_plan_data(const std::vector<DataSpec>& sources,
                                      const GivenArrays* arrays) {
  std::vector<FleetData> out;
  std::vector<std::string> problems;
  out.reserve(sources.size());
  for (const DataSpec& s : sources) {
    try {
      out.push_back(load_fleet_data(s, arrays));
    } catch (const DataError& e) {
      problems.push_back(e.what());
      out.emplace_back();  // keeps indices; never used, the load fails below
    }
  }
  if (problems.size() == 1) throw DataError(problems[0]);
  if (!problems.empty()) {
    std::string msg = "failed to load the plan's data: " + std::to_string(problems.size()) +
                      " of " + std::to_string(sources.size()) + " sources failed";
    for (const auto& p : problems) msg += "\n  " + p;
    throw DataError(msg);
  }
  return out;
}

size_t data_bytes(const std::vector<FleetData>& data) {
  size_t b = 0;
  for (const FleetData& d : data) b += d.bytes();
  return b;
}

}  // namespace nnfleet
