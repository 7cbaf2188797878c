// What a Model (nnfleet/model.h) holds: the loaded Keras file and what it reports.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/keras/keras_reader.h"
#include "nnfleet/model.h"

namespace nnfleet::api {

struct Model::Impl {
  LoadedModel lm;
  std::string path, summary;
  std::vector<TensorInfo> inputs, outputs;
};

// The library's way in to a Model's Impl (a friend of Model): the fleet's trained models and the
// run's results are made here, never by the front ends.
struct ModelAccess {
  using Impl = Model::Impl;
  static Model make(std::shared_ptr<const Model::Impl> impl) { return Model(std::move(impl)); }
  static const Model::Impl& impl(const Model& m) { return *m.impl_; }
};

}  // namespace nnfleet::api
