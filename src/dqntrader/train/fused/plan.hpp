// The fused learning step's plan, on the host alone (every build; tests/test_fused_plan.cpp
// checks it on any machine): the shapes it takes, where the parts of a block's shared memory lie,
// how a weight set is loaded, and how a population's batches are cut into chunks (one block of
// the loss kernel each) for a device described by its numbers. Everything here is arithmetic on
// sizes; the kernels (loss_kernel.cpp, learn_kernel.cpp) and the host step (step.cpp) are built
// with CUDA only.
#pragma once

#include <cstddef>
#include <functional>

#include <Kokkos_Macros.hpp>

#include "dqntrader/nn/network_spec.hpp"
#include "dqntrader/nn/q_head.hpp"

namespace dqntrader::train::fused {

constexpr int kMaxHidden = 4;                // hidden layers
constexpr int kMaxWidth = 128;               // a hidden layer's units, and the state's values
constexpr int kMaxHead = nn::kMaxHeadWidth;  // the head's outputs
constexpr int kSums = 3 + kMaxHead;          // loss, Q, non-finite; then d loss / d Q an output
constexpr int kPad = 8;                      // values after each shared row (bank spread)
constexpr int kThreads = 512;                // a loss block's threads
constexpr int kMaxRows = 128;                // the most samples a chunk takes
constexpr int kFewestRows = 16;              // the fewest
constexpr int kEnvironmentRows = 64;         // the most environments' rows a pass takes
constexpr int kMaxStateRuns = 3;             // the runs of states a load takes

KOKKOS_INLINE_FUNCTION constexpr int pad16(int n) {
  return (n + 15) / 16 * 16;
}

/// The shift of a padded row's 16-byte chunks: a row of `values` (16 to 128) bf16 values is
/// 1 << chunk_shift(values) chunks.
KOKKOS_INLINE_FUNCTION constexpr int chunk_shift(int values) {
  return values <= 16 ? 1 : values <= 32 ? 2 : values <= 64 ? 3 : 4;
}

/// The head padded to whole tiles of outputs.
constexpr int kHeadPad = pad16(kMaxHead);

/// A network's shape and where each layer lies in a member's parameter vector (the layout of
/// nn::ParameterLayout: layer l's weight [inputs x outputs] row-major, then its bias; layer
/// `hidden` is the head, whose outputs are the actions, plus the value first when dueling).
struct Shape {
  int hidden = 0;
  int inputs[kMaxHidden + 1] = {}, outputs[kMaxHidden + 1] = {};
  std::size_t weight[kMaxHidden + 1] = {}, bias[kMaxHidden + 1] = {};
  std::size_t size = 0;  // parameters of one network
  bool dueling = false;
};

/// The shape of spec's networks (hidden beyond kMaxHidden, and nothing else, when they have
/// more layers than that).
Shape shape_of(const nn::NetworkSpec& spec);

/// The widths the loss kernel is compiled for, {32, 64, 128}: the state padded to `in` of them
/// and every hidden layer to `width`, so that a product's extents, tiles and strides are
/// constants. A kernel a pair.
constexpr int kWidths[3] = {32, 64, 128};
struct Geometry {
  int in = 0, width = 0;
};
/// The compiled widths of shape's networks (for a shape that fits).
Geometry geometry(const Shape& shape);
/// The index of a compiled width in kWidths.
int width_index(int width);

/// Where the parts of a block's shared memory lie (bytes from its start, each 128-byte
/// aligned) for R rows, and the strides of their rows (values). The online network's first
/// layer's inputs act[0] hold R rows of s', R of s and the environments' rows, and so do its
/// further layers' act[l] where both weight sets are held; where one is, the online network's
/// hidden outputs on s' pass through the scratch parts as the target's do (the target's pass
/// has ended), and act[l] (l > 0) skips the s' rows. The target's hidden outputs alternate
/// between the two scratch parts, which the backward pass then takes for the output gradients.
/// The head's outputs are rows of ldq floats.
struct Smem {
  int in_pad[kMaxHidden + 1], out_pad[kMaxHidden + 1];
  int ldw[kMaxHidden + 1];  // layer l's weight rows: out_pad[l] + kPad
  int lda[kMaxHidden + 1];  // layer l's input rows (act[l]): in_pad[l] + kPad
  int ldd;                  // scratch rows: the widest layer's + kPad
  int ldq;                  // a row of the head's outputs: 4 or 8 values
  int rows;                 // R: the s' rows and the s rows
  int environment_rows;     // the environments' rows of a pass
  int sets;                 // weight sets held: 2, the online's then the target's; or 1
  int skip;                 // act[0]'s first rows that act[l] (l > 0) does not hold: 0 or R
  // A hidden layer's bias in bf16, the head's in float; set 1 is set 0 where one is held.
  std::size_t w[2][kMaxHidden + 1], b[2][kMaxHidden + 1], act[kMaxHidden + 1], scratch[2];
  std::size_t q_online, q_target;  // the head's outputs: act[0]'s rows, and R rows
  std::size_t bytes;
};
Smem smem_layout(const Shape& shape, int rows, int environment_rows, int sets);

/// A weight set's layer weights or hidden bias as a load takes it: rows x cols bf16 values
/// `from` values after the set's first (row-major) into shared memory `to` bytes from its
/// start (rows ld_to values apart), zeros up to rows_pad rows of 8 << shift values; runs: every
/// row is whole aligned 16-byte chunks (copied without waiting), else value by value.
struct WeightPiece {
  std::size_t from;
  unsigned to;
  int rows, cols, rows_pad, shift, ld_to, runs;
};
/// A set's pieces: its layers' weights, then its hidden layers' biases.
KOKKOS_INLINE_FUNCTION constexpr int pieces_per_set(int hidden) {
  return 2 * hidden + 1;
}
constexpr int kMaxPieces = pieces_per_set(kMaxHidden);
/// Each slot's pieces for shape and layout; aligned: every set's first value is 16-byte
/// aligned and the sets are a multiple of 8 values apart.
void describe_pieces(const Shape& shape, const Smem& layout, bool aligned,
                     WeightPiece (&pieces)[2][kMaxPieces]);

/// The floats a chunk's gradient parts take: the parameters, rounded up to 16 bytes.
std::size_t part_stride(const Shape& shape);

/// The most device memory a member's chunks take beside what every learning path holds (its
/// parts: a gradient and the loss's sums a chunk), for batches of batch samples: chunks of the
/// fewest samples (kFewestRows).
std::size_t member_bytes(const Shape& shape, std::size_t batch);

/// What the plan asks of a device: its multiprocessors, the dynamic shared memory a loss block
/// may take (the device's most for a block less the kernel's static shared memory), and how
/// many loss blocks of `shared` dynamic bytes a multiprocessor runs at once.
struct Device {
  int multiprocessors = 0;
  std::size_t dynamic_shared = 0;
  std::function<int(std::size_t shared)> resident;
};

/// Whether a loss kernel is compiled for networks of this shape: 1 to kMaxHidden hidden layers,
/// a state and hidden layers of at most kMaxWidth values, a head of at most kMaxHead outputs.
bool compiled(const Shape& shape);

/// Whether the step takes networks of this shape on a device whose loss block may take
/// dynamic_shared bytes: compiled(shape), and the smallest chunk's layout fits.
bool fits(const Shape& shape, std::size_t dynamic_shared);

/// How the loss kernel splits members' batches: R samples a chunk (a block), the weight sets a
/// block holds at once and the environments' rows of a pass.
struct Chunking {
  int rows = 0, sets = 0, environment_rows = 0, chunks = 0;
};

/// The chunking of members' batches of batch samples and environments further rows (shape
/// fits the device): of the chunk sizes 128, 64, 32 and 16 whose blocks fit (both weight sets
/// where they fit beside the chunk, a pass's environments' rows as many as fit, up to the
/// chunk's share), the largest (fewer chunks: fewer parts to add) whose blocks fill three
/// quarters of the multiprocessors in one wave; else the smallest whose blocks run in one wave;
/// else the largest (the fewest waves).
Chunking chunking(const Shape& shape, std::size_t members, std::size_t batch,
                  std::size_t environments, const Device& device);

/// The rounds in which the device runs the loss kernel's blocks for members chunked so: 1 where
/// every member's chunks are resident at once.
std::size_t waves(const Shape& shape, const Chunking& chunks, std::size_t members,
                  const Device& device);

}  // namespace dqntrader::train::fused
