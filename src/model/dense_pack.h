// DensePack: trains several models on the same batches with their first Dense layers computed as
// one wider product (ParallelMLPs, arXiv 2206.08369). Each member's first layer reads the same
// input rows x[N,I], so x [W_1 | W_2 | ...] is one GEMM of sum-of-widths columns, and its weight
// gradient x^T [dZ_1 | dZ_2 | ...] another; everything after the first layer (deeper layers, the
// loss, the optimizer, metrics) stays each member's own Network, in its own arena.
//
// Results are bit-identical to training each member alone on the same batches: gemm() computes
// every element as one chain of fused multiply-adds over k in order (kernels/gemm.h), so a column
// of the wide product never depends on the product's width nor on its neighbours, and the pack
// starts each chain where Dense does (z from the bias, dW from the zeroed gradient).
// tests/model/dense_pack_test.cpp checks this bit for bit on W3's shapes.
#pragma once

#include <vector>

#include "kernels/activation.h"
#include "model/network.h"

namespace nnfleet {

class DensePack {
 public:
  // `members`: training Networks, all of one piece and the same max_batch, whose layer 0 is a
  // trainable Dense with a bias reading the model's only input, of the same features. Throws
  // ModelError naming the member and the rule otherwise (nothing is changed then). The members
  // must outlive the pack; while it lives their layer 0 is computed here in training steps
  // (Network::set_first_layer_outside), and inference runs them as usual.
  explicit DensePack(std::vector<Network*> members);
  ~DensePack();
  DensePack(const DensePack&) = delete;
  DensePack& operator=(const DensePack&) = delete;

  size_t size() const { return members_.size(); }
  int columns() const { return cols_; }

  // One training step of every active member on the same n rows x[n, I] (what each member's
  // input(0) would hold); member m's targets are targets[m], its loss goes to losses[m] (as
  // Network::train_step returns it). active[m] == 0 skips member m (finished, diverged): its
  // columns are still computed, from its last weights, and ignored, which changes no bit of the
  // others'. Never allocates or throws.
  void train_step(int n, const float* x, const Targets* const* targets, const char* active,
                  double* losses);

 private:
  struct Member {
    Network* net;
    Activation act;
    int width = 0, col = 0;  // its columns [col, col + width) of the wide product
  };
  // Refuses a member that cannot join, naming it and the rule.
  static Member check_member(Network* net, size_t index, int features, int max_batch);
  void load_weights(const char* active);         // W and b of the members into the wide ones
  void forward(int n, const float* x);           // z[n, cols] = b + x W
  void scatter_forward(const Member& m, int n);  // its z columns, then its activation
  void gather_backward(const Member& m, int n);  // its dz columns (and its bias gradient)
  void weight_gradients(int n, const float* x, const char* active);

  std::vector<Member> members_;
  int features_ = 0, cols_ = 0, max_batch_ = 0;
  // One block: w[I, cols], b[cols], z[max_batch, cols], dz[max_batch, cols], dw[I, cols].
  std::vector<float> block_;
  float *w_ = nullptr, *b_ = nullptr, *z_ = nullptr, *dz_ = nullptr, *dw_ = nullptr;
};

}  // namespace nnfleet
