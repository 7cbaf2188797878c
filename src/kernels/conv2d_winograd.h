// Winograd convolution for stride-1, undilated 3x3 Conv2D (internal to src/kernels), the path
// conv2d_forward and conv2d_backward take where it measured faster than the direct convolution on
// AVX2 (bench/kernels/conv_winograd_bench.cpp, BENCHMARKS.md). With F(2x2,3x3), each 2x2 block of
// output pixels ("tile") is computed from the 4x4 input patch under it as A^T [(G g G^T) . (B^T d
// B)] A (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): 16
// multiplications per output channel and input channel instead of 36, i.e. 2.25x fewer FLOPs. The
// 16 element-wise products, summed over channels, are 16 GEMMs [tiles, C] x [C, F] through gemm().
// F(4x4,3x3) does the same with 4x4 tiles from 6x6 patches: 36 GEMMs, 4x fewer multiplications.
//
// The kernel gradient is the same algorithm's adjoint (see conv2d_backward_weights_winograd).
// Tiles are cut per image, so an image's result never depends on the batch it came in; the
// passes are single-threaded, start no threads and give results independent of buffer alignment.
// They differ from the direct convolution by float rounding only (within 1e-4 relative on the
// tested shapes: the transforms add and subtract a few values of similar magnitude).
#pragma once

#include <cstddef>

#include "kernels/activation.h"
#include "kernels/conv2d.h"

namespace nnfleet {

// Whether the Winograd kernels can run g: 3x3, stride 1, dilation 1, Keras "same" or "valid"
// padding (pads 0 or 1). Says nothing about speed (see conv2d_use_winograd).
bool winograd_supported(const ConvGeometry& g);

// The measured dispatch rule: whether conv2d_forward (backward_data false) or the input-gradient
// half of conv2d_backward (true) takes the Winograd path for g. Implies winograd_supported(g).
bool conv2d_use_winograd(const ConvGeometry& g, bool backward_data);

// Whether conv2d_forward (backward_data false) or the input-gradient half of conv2d_backward
// (true) takes F(4x4,3x3) rather than F(2x2,3x3) when conv2d_use_winograd(g, backward_data);
// implies it. Both passes in the AVX-512 build, the forward pass in the AVX2 build (see the
// measurements beside it).
bool conv2d_use_winograd_f4(const ConvGeometry& g, bool backward_data);

// The measured dispatch rule for the kernel-gradient half of conv2d_backward. Implies
// winograd_supported(g).
bool conv2d_use_winograd_weights(const ConvGeometry& g);

// Scratch floats the Winograd passes need for g (independent of the batch size).
size_t conv2d_winograd_scratch_floats(const ConvGeometry& g);

// y[N,OH,OW,F] = conv(x[N,H,W,C], w[3,3,C,F]) + b[F] (b may be null), then act_out = act(y) per
// image when act is given (act_out may be y). Requires winograd_supported(g).
void conv2d_forward_winograd(const ConvGeometry& g, int n, const float* x, const float* w,
                             const float* b, float* y, float* scratch,
                             const Activation* act = nullptr, float* act_out = nullptr);

// The same with F(4x4,3x3) tiles: 6x6 input patches, 4x fewer multiplications than the direct
// convolution, a little larger rounding errors (the transforms' coefficients reach 8 and 1/24).
void conv2d_forward_winograd_f4(const ConvGeometry& g, int n, const float* x, const float* w,
                                const float* b, float* y, float* scratch,
                                const Activation* act = nullptr, float* act_out = nullptr);

// dx[N,H,W,C] += the input gradient of that convolution for dy[N,OH,OW,F]: the same Winograd
// convolution of dy with the kernel rotated by 180 degrees and its channel axes swapped. With
// dx_fresh, dx holds no zeros: it is written whole, as 0 + the gradient (the bits += gives on a
// zeroed dx). Requires winograd_supported(g).
void conv2d_backward_data_winograd(const ConvGeometry& g, int n, const float* w, const float* dy,
                                   float* dx, float* scratch, bool dx_fresh = false);
void conv2d_backward_data_winograd_f4(const ConvGeometry& g, int n, const float* w, const float* dy,
                                      float* dx, float* scratch, bool dx_fresh = false);

// dw[3,3,C,F] += the kernel gradient of that convolution for x[N,H,W,C] and dy[N,OH,OW,F]:
// per position k of the 4x4 transformed tile, du[k][C][F] = sum over every tile of every image of
// (B^T d B)[k][C]^T (A dy A^T)[k][F] (16 GEMMs with K = tiles), then dw += G^T du G once per
// call. The result depends on the images of the call, in order, not on how a caller splits its
// batch into calls only up to float rounding. Requires winograd_supported(g).
void conv2d_backward_weights_winograd(const ConvGeometry& g, int n, const float* x, const float* dy,
                                      float* dw, float* scratch);
// The same with F(4x4,3x3) tiles: 36 GEMMs over tiles of 16 outputs (against 16 over tiles of 4),
// 0.56x the multiply-adds and transforms; rounding within the same 1e-4 of the oracle.
void conv2d_backward_weights_winograd_f4(const ConvGeometry& g, int n, const float* x,
                                         const float* dy, float* dw, float* scratch);
// Whether the kernel-gradient half of conv2d_backward takes F(4x4,3x3): where the input gradient
// does (conv2d_use_winograd_f4) and conv2d_use_winograd_weights(g). Implies the latter.
bool conv2d_use_winograd_f4_weights(const ConvGeometry& g);

}  // namespace nnfleet
