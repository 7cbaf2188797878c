// What a Model (nnfleet/model.h) holds: the loaded Keras file and what it reports.
#pragma once

#include <string>
#include <vector>

#include "io/keras/keras_reader.h"
#include "nnfleet/model.h"

namespace nnfleet::api {

struct Model::Impl {
  LoadedModel lm;
  std::string path, summary;
  std::vector<TensorInfo> inputs, outputs;
};

}  // namespace nnfleet::api
