// Helpers shared by the image preprocessing and augmentation layers (image_preprocessing.cpp,
// image_augmentation.cpp): their common config keys and Keras's crop_to_aspect_ratio window.
#pragma once

#include <string>

#include "kernels/resize.h"
#include "layers/layer.h"

namespace nnfleet {

// Reads data_format (channels_last only: the layers work on NHWC) and the seed (null or an
// integer, kept to be written back; nnfleet draws from the model's own stream instead).
Json read_image_common(LayerConfig& c, bool has_seed = true);
// Writes what read_image_common read.
void write_image_common(Json& j, const Json& seed);

// The largest centred window of an h x w image with the aspect ratio of th x tw, in TensorFlow's
// float32 arithmetic (Keras's crop_to_aspect_ratio and smart_resize).
ResizeGeom aspect_crop(int h, int w, int c, int th, int tw);

// The image rank check every image layer makes: [height, width, channels] per sample.
void require_image(const Shape& in, const char* cls);

}  // namespace nnfleet
