// The one list of layer kinds: Keras class name and the identifier of its factory and examples.
// Adding a kind here is the only way to register it, and it forces a factory (make_<id>) and
// gradient-check examples (<id>_examples), which tests/layers/gradient_check_test.cpp runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/registry.h"

#define NNFLEET_LAYER_KINDS(X)                        \
  X(Dense, dense)                                     \
  X(Conv2D, conv2d)                                   \
  X(DepthwiseConv2D, depthwise_conv2d)                \
  X(MaxPooling2D, max_pooling2d)                      \
  X(AveragePooling2D, average_pooling2d)              \
  X(GlobalAveragePooling2D, global_average_pooling2d) \
  X(GlobalMaxPooling2D, global_max_pooling2d)         \
  X(Flatten, flatten)                                 \
  X(Reshape, reshape)                                 \
  X(Dropout, dropout)                                 \
  X(BatchNormalization, batch_normalization)          \
  X(Activation, activation)                           \
  X(ReLU, relu)                                       \
  X(LeakyReLU, leaky_relu)                            \
  X(ELU, elu)                                         \
  X(Softmax, softmax)                                 \
  X(Rescaling, rescaling)                             \
  X(ZeroPadding2D, zero_padding2d)                    \
  X(Add, add)                                         \
  X(Concatenate, concatenate)                         \
  X(Conv1D, conv1d)                                   \
  X(MaxPooling1D, max_pooling1d)                      \
  X(AveragePooling1D, average_pooling1d)              \
  X(GlobalAveragePooling1D, global_average_pooling1d) \
  X(GlobalMaxPooling1D, global_max_pooling1d)         \
  X(Embedding, embedding)                             \
  X(UpSampling1D, up_sampling1d)                      \
  X(Cropping1D, cropping1d)                           \
  X(ZeroPadding1D, zero_padding1d)                    \
  X(RepeatVector, repeat_vector)                      \
  X(Permute, permute)                                 \
  X(TimeDistributed, time_distributed)                \
  X(SimpleRNN, simple_rnn)                            \
  X(LSTM, lstm)                                       \
  X(GRU, gru)                                         \
  X(Bidirectional, bidirectional)                     \
  X(Masking, masking)                                 \
  X(UpSampling2D, up_sampling2d)                      \
  X(LayerNormalization, layer_normalization)          \
  X(UnitNormalization, unit_normalization)            \
  X(PReLU, prelu)                                     \
  X(Multiply, multiply)                               \
  X(Subtract, subtract)                               \
  X(Average, average)                                 \
  X(Maximum, maximum)                                 \
  X(Minimum, minimum)                                 \
  X(Dot, dot)                                         \
  X(SpatialDropout1D, spatial_dropout1d)              \
  X(SpatialDropout2D, spatial_dropout2d)              \
  X(GaussianNoise, gaussian_noise)                    \
  X(GaussianDropout, gaussian_dropout)                \
  X(AlphaDropout, alpha_dropout)                      \
  X(Conv2DTranspose, conv2d_transpose)                \
  X(SeparableConv2D, separable_conv2d)                \
  X(Cropping2D, cropping2d)                           \
  X(Resizing, resizing)                               \
  X(CenterCrop, center_crop)                          \
  X(RandomCrop, random_crop)                          \
  X(RandomFlip, random_flip)                          \
  X(RandomRotation, random_rotation)                  \
  X(RandomZoom, random_zoom)                          \
  X(RandomTranslation, random_translation)            \
  X(RandomContrast, random_contrast)                  \
  X(RandomBrightness, random_brightness)              \
  X(TextVectorization, text_vectorization)            \
  X(TFOpLambda, tf_op_lambda)                         \
  X(SlicingOpLambda, slicing_op_lambda)               \
  X(Normalization, normalization)                     \
  X(Discretization, discretization)                   \
  X(CategoryEncoding, category_encoding)              \
  X(MultiHeadAttention, multi_head_attention)         \
  X(Attention, attention)                             \
  X(AdditiveAttention, additive_attention)            \
  X(StringLookup, string_lookup)                      \
  X(IntegerLookup, integer_lookup)                    \
  X(Hashing, hashing)

namespace nnfleet {

#define NNFLEET_DECLARE_KIND(cls, id)                                          \
  std::unique_ptr<Layer> make_##id(LayerConfig& cfg, const std::string& name); \
  std::vector<LayerExample> id##_examples();
NNFLEET_LAYER_KINDS(NNFLEET_DECLARE_KIND)
#undef NNFLEET_DECLARE_KIND

#define NNFLEET_COUNT_KIND(cls, id) +1
inline constexpr int kNumLayerKinds = 0 NNFLEET_LAYER_KINDS(NNFLEET_COUNT_KIND);
#undef NNFLEET_COUNT_KIND

}  // namespace nnfleet
