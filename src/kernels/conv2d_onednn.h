// oneDNN's direct convolution primitives behind conv2d_forward and the input-gradient half of
// conv2d_backward (internal to src/kernels). oneDNN JIT-compiles them for the best ISA the machine
// has (AVX2, AVX-512 ...), capped by the ONEDNN_MAX_CPU_ISA environment variable.
//
// Plan time: conv2d_scratch_floats calls onednn_conv_scratch_floats, which creates the primitives
// for a geometry once (process-wide, shared by every model and thread; later calls find them) and
// says how much of the caller's scratch they need. Run time: the passes look the plan up, run on
// the caller's scratch (oneDNN's scratchpad in user mode) and never start threads (oneDNN's OpenMP
// runtime is held to one thread). Batches run in fixed pieces of images (kOnednnPiece, then single
// images), so an image's result never depends on the batch it came in.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/activation.h"
#include "kernels/conv2d.h"

namespace nnfleet {

// Images per oneDNN call (the rest of a batch runs one image at a time).
inline constexpr int kOnednnPiece = 16;

// Scratch floats onednn_conv_forward/backward_data need for a batch of up to n, after creating
// the plan for g if there is none yet; 0 when oneDNN is not used for g (no JIT primitive, or a
// shape the im2col/GEMM path serves better). Thread-safe.
size_t onednn_conv_scratch_floats(const ConvGeometry& g, int n);

// y[N,OH,OW,F] = conv(x, w) + b, then act_out = act(y) (fused into the primitive for relu in
// place). Returns false, having written nothing, when g has no plan.
bool onednn_conv_forward(const ConvGeometry& g, int n, const float* x, const float* w,
                         const float* b, float* y, float* scratch, const Activation* act,
                         float* act_out);

// dx[N,H,W,C] += conv_backward_data(dy[N,OH,OW,F], w). Returns false, having written nothing,
// when g has no plan.
bool onednn_conv_backward_data(const ConvGeometry& g, int n, const float* w, const float* dy,
                               float* dx, float* scratch);

// oneDNN's name for the implementation planned for g ("jit:avx2", "brg:avx512_core", ...), forward
// or backward-data; empty when g has no plan. For tests and benchmarks.
std::string onednn_conv_impl(const ConvGeometry& g, bool backward_data);

}  // namespace nnfleet
