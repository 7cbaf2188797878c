// Network: where a training piece's activation gradients live and when each is zeroed, and the
// views (layers whose output is their input's bytes).
//
// Backward runs the nodes last to first; call node i's backward step L-1-i, and the loss and
// activity regularizers (which write gradients before any backward) step -1. The gradient of a
// node's output is live from its first write (the backward of its last consumer, or step -1) to
// its node's own backward, which reads it last. Gradients live at the same step get distinct
// memory; the others share (buffer_plan.h). Each block is zeroed at the start of its life, as
// backward ADDS into it; before this plan, the whole gradient region was zeroed every step.
#include <algorithm>
#include <climits>

#include "model/buffer_plan.h"
#include "model/network.h"

namespace nnfleet {

size_t Network::view_offset(const Piece& pc, size_t i) const {
  const Model& m = *model_;
  const int id = m.layer_inputs(i)[0];
  if (m.is_input(id)) {
    const size_t k = static_cast<size_t>(id);
    return input_offs_[k] + static_cast<size_t>(pc.row0) * m.input(k).shape.size();
  }
  const NodeBuffers& s = pc.nodes[m.layer_of(id)];
  const int k = m.input_tensor(i, 0);
  return k == 0 ? s.y_off : s.extra_y_off[static_cast<size_t>(k - 1)];
}

void Network::plan_gradients(Piece& pc) {
  const Model& m = *model_;
  const size_t L = m.num_layers();
  const auto step = [L](size_t i) { return static_cast<int>(L) - 1 - static_cast<int>(i); };
  // Every output tensor (node i, output k), numbered node by node from base[i].
  std::vector<size_t> base(L + 1, 0), node_of, row_floats;
  for (size_t i = 0; i < L; ++i) {
    const PlannedNode& p = m.planned(i);
    base[i + 1] = base[i] + 1 + p.extra_out_shapes.size();
    node_of.push_back(i);
    row_floats.push_back(static_cast<size_t>(p.out_shape.size()));
    for (const Shape& s : p.extra_out_shapes) {
      node_of.push_back(i);
      row_floats.push_back(static_cast<size_t>(s.size()));
    }
  }
  const auto tensor = [&](int id, size_t i, size_t j) {
    return base[m.layer_of(id)] + static_cast<size_t>(m.input_tensor(i, j));
  };
  // A view's gradient is its input's: owner[t] is the tensor whose block t's gradient is.
  std::vector<size_t> owner(base[L]);
  for (size_t t = 0; t < owner.size(); ++t) owner[t] = t;
  for (size_t i = 0; i < L; ++i)
    if (views_[i] && !m.is_input(m.layer_inputs(i)[0]))
      owner[base[i]] = owner[tensor(m.layer_inputs(i)[0], i, 0)];
  // First write of each owner's block (INT_MAX: none) and whether it needs one at all.
  std::vector<int> first(base[L], INT_MAX);
  std::vector<char> needed(base[L], 0);
  for (size_t t = 0; t < owner.size(); ++t) needed[owner[t]] |= needs_backward_[node_of[t]];
  for (size_t j = 0; j < m.num_outputs(); ++j) {
    const size_t t =
        owner[base[m.layer_of(m.output_node(j))] + static_cast<size_t>(m.output_tensor(j))];
    first[t] = -1;
    needed[t] = 1;
  }
  for (const auto& a : activity_)
    if (needs_backward_[a.first]) first[owner[base[a.first]]] = -1;
  for (size_t c = 0; c < L; ++c) {
    if (!needs_backward_[c] || views_[c]) continue;
    for (size_t j = 0; j < m.layer_inputs(c).size(); ++j) {
      const int id = m.layer_inputs(c)[j];
      if (m.is_input(id) || !needs_backward_[m.layer_of(id)]) continue;
      int& f = first[owner[tensor(id, c, j)]];
      f = std::min(f, step(c));
    }
  }
  std::vector<size_t> blocks;  // the owners with a block
  std::vector<BufferLife> lives;
  for (size_t t = 0; t < owner.size(); ++t) {
    if (owner[t] != t || !needed[t]) continue;
    const int last = step(node_of[t]);
    // Nothing writes it (an unused extra output): it is read, as zeros, by its node's backward.
    if (first[t] == INT_MAX) first[t] = last;
    NNFLEET_CHECK(first[t] <= last &&
                  (first[t] < 0 || !views_[L - 1 - static_cast<size_t>(first[t])]));
    blocks.push_back(t);
    lives.push_back({static_cast<size_t>(pc.capacity) * row_floats[t], first[t], last});
  }
  size_t region_floats = 0;
  const std::vector<size_t> local = place_buffers(lives, Arena::kAlignFloats, &region_floats);
  const size_t region = arena_.reserve(region_floats);
  std::vector<size_t> off(base[L], region);  // a tensor without a block: never read or written
  for (size_t b = 0; b < blocks.size(); ++b) {
    const size_t t = blocks[b];
    off[t] = region + local[b];
    const ZeroBlock z{off[t], row_floats[t]};
    if (first[t] < 0)
      pc.zero_first.push_back(z);
    else
      pc.zero_before[L - 1 - static_cast<size_t>(first[t])].push_back(z);
  }
  for (size_t i = 0; i < L; ++i) {
    NodeBuffers& nb = pc.nodes[i];
    nb.dy_off = off[owner[base[i]]];
    nb.extra_dy_off.clear();
    for (size_t t = base[i] + 1; t < base[i + 1]; ++t) nb.extra_dy_off.push_back(off[owner[t]]);
  }
}

// A node whose layer can write its input gradients (Layer::writes_whole_dx) is handed them
// unzeroed when it writes each first (they are its zero_before blocks, all of them), each fills
// its block and no two are one: for W1's m7, the pooling's, the dropout's and the second
// convolution's, 8.7 MB a step that no longer pass through memset first.
void Network::plan_fresh_dx(Piece& pc) {
  const Model& m = *model_;
  pc.fresh_dx.assign(m.num_layers(), 0);
  for (size_t i = 0; i < m.num_layers(); ++i) {
    const std::vector<ZeroBlock>& blocks = pc.zero_before[i];
    const NodeBuffers& nb = pc.nodes[i];
    if (blocks.empty() || !needs_backward_[i] || views_[i] || !m.layer(i).writes_whole_dx())
      continue;
    bool ok = true;
    size_t matched = 0;
    for (size_t j = 0; j < nb.dx.size() && ok; ++j) {
      if (nb.dx[j] == nullptr) continue;
      for (size_t k = 0; k < j; ++k) ok = ok && nb.dx[k] != nb.dx[j];
      const auto rows = static_cast<size_t>(m.planned(i).in_shapes[j].size());
      const auto same = [&](const ZeroBlock& z) {
        return arena_.at(z.off) == nb.dx[j] && z.row_floats == rows;
      };
      ok = ok && std::find_if(blocks.begin(), blocks.end(), same) != blocks.end();
      ++matched;
    }
    pc.fresh_dx[i] = ok && matched == blocks.size();
  }
}

// A node writes its parameter gradients (LayerArgs::dparams_fresh) when its layer can, it is
// neither a shared layer's call (the calls add up) nor layer 0 computed by a pack (which adds
// its own), and none of them is a frozen weight's sink. The others' gradients and the sink are
// zeroed at each step's start, as ranges [offset, floats), adjacent ones merged.
void Network::plan_fresh_dparams(Piece& pc) {
  const Model& m = *model_;
  const size_t L = m.num_layers();
  std::vector<char> shared(L, 0);
  for (size_t i = 0; i < L; ++i)
    if (const int o = m.shares(i); o >= 0) shared[i] = shared[static_cast<size_t>(o)] = 1;
  pc.fresh_dparams.assign(L, 0);
  std::vector<std::pair<size_t, size_t>> ranges;
  if (const size_t sink = sink_floats(); sink > 0) ranges.push_back({pc.sink_off, sink});
  const float* base = arena_.at(0);
  for (size_t i = 0; i < L; ++i) {
    const auto& specs = m.planned(i).params;
    const auto& dparams = pc.nodes[i].dparams;
    bool sink = false;
    for (size_t j = 0; j < specs.size(); ++j) sink = sink || !specs[j].trainable;
    const bool fresh = m.layer(i).writes_whole_dparams() && !shared[i] && !sink &&
                       !(first_outside_ && i == 0) && needs_backward_[i] && !views_[i];
    pc.fresh_dparams[i] = fresh && !dparams.empty();
    if (fresh) continue;
    for (size_t j = 0, k = 0; j < specs.size() && k < dparams.size(); ++j) {
      if (!specs[j].trainable) {
        k += m.planned(i).layer_trainable[j] ? 1 : 0;  // a sink entry, zeroed above
        continue;
      }
      const auto off = static_cast<size_t>(dparams[k++] - base);
      ranges.push_back({off, static_cast<size_t>(specs[j].shape.size())});
    }
  }
  std::sort(ranges.begin(), ranges.end());
  pc.zero_params.clear();
  for (const auto& r : ranges) {
    auto& z = pc.zero_params;
    if (!z.empty() && r.first <= z.back().first + z.back().second)
      z.back().second = std::max(z.back().second, r.first + r.second - z.back().first);
    else
      z.push_back(r);
  }
}

}  // namespace nnfleet
