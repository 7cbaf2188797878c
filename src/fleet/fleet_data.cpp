// Loading a plan's data sources.
#include "fleet/fleet_data.h"

#include <cmath>

namespace nnfleet {

size_t FleetData::bytes() const {
  size_t b = train.x.size_bytes() + train.y.size_bytes();
  if (test) b += test->x.size_bytes() + test->y.size_bytes();
  return b;
}

XY load_source(const DataSource& s) {
  XY d;
  switch (s.kind) {
    case DataSource::Kind::kFashionMnist:
      return load_fashion_mnist(s.split);
    case DataSource::Kind::kNpy:
      d.x = load_npy(s.x);
      d.y = load_npy(s.y);
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
  const std::string what = s.kind == DataSource::Kind::kCsv || s.kind == DataSource::Kind::kNpz
                               ? "'" + s.file + "'"
                               : "'" + s.x + "' and '" + s.y + "'";
  if (d.x.shape().rank() < 2)
    throw DataError("failed to load data " + what + ": x must have a sample axis and features; "
                    "expected rank >= 2, got shape " + d.x.shape().str());
  if (d.x.rows() != d.y.rows())
    throw DataError("failed to load data " + what + ": x and y disagree on the number of samples; "
                    "expected equal first dimensions, got " + d.x.shape().str() + " and " +
                    d.y.shape().str());
  if (d.x.rows() == 0)
    throw DataError("failed to load data " + what + ": no samples; expected at least one row");
  return d;
}

namespace {
void label_stats(const Array& y, bool& integral, double& lo, double& hi) {
  const int64_t n = static_cast<int64_t>(y.shape().size());
  for (int64_t i = 0; i < n; ++i) {
    const double v = y.at(i);
    if (v != std::floor(v)) integral = false;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
}
}  // namespace

FleetData load_fleet_data(const DataSpec& spec) {
  FleetData f;
  f.train = load_source(spec.train);
  if (spec.test) {
    f.test = load_source(*spec.test);
    if (!(f.test->x.sample_shape() == f.train.x.sample_shape()))
      throw DataError("failed to load data: test samples have shape " +
                      f.test->x.sample_shape().str() + "; expected the train sample shape " +
                      f.train.x.sample_shape().str());
  }
  f.scale = static_cast<float>(spec.scale);
  f.input_shape = f.train.x.sample_shape();
  const int64_t rows = f.train.x.rows();
  // Keras: split_at = int(n * (1 - validation_split)).
  f.n_train = static_cast<int64_t>(static_cast<double>(rows) * (1.0 - spec.validation_split));
  f.n_val = rows - f.n_train;
  if (spec.validation_split > 0 && (f.n_val == 0 || f.n_train == 0))
    throw DataError("failed to split data: validation_split " +
                    std::to_string(spec.validation_split) + " of " + std::to_string(rows) +
                    " samples leaves an empty part; expected both parts non-empty");
  f.label_min = f.label_max = f.train.y.at(0);
  label_stats(f.train.y, f.labels_integral, f.label_min, f.label_max);
  if (f.test) label_stats(f.test->y, f.labels_integral, f.label_min, f.label_max);
  return f;
}

}  // namespace nnfleet
