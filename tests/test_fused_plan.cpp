// The fused learning step's plan (train/fused/plan.hpp), on any machine: the shapes it compiles
// kernels for, the parts of a block's shared memory against what the kernels read and write in
// them, the pieces a weight set is loaded by, and the chunking of a population's batches on a
// device described by its numbers (a Hopper GPU's: 132 multiprocessors, 227 KB of shared memory a
// block, one 512-thread loss block a multiprocessor, as its registers allow).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/nn/network_spec.hpp"
#include "dqntrader/train/fused/plan.hpp"

namespace dqntrader {
namespace {

namespace fused = train::fused;

constexpr std::size_t kHopperShared = 232448;  // cudaDevAttrMaxSharedMemoryPerBlockOptin, sm_90
constexpr std::size_t kStaticShared = 512;     // the loss kernel's own (ptxas: 512 bytes smem)

fused::Device hopper() {
  fused::Device d;
  d.multiprocessors = 132;
  d.dynamic_shared = kHopperShared - kStaticShared;
  d.resident = [](std::size_t shared) { return shared <= kHopperShared - kStaticShared ? 1 : 0; };
  return d;
}

nn::NetworkSpec spec_of(std::size_t state, std::vector<std::size_t> hidden, bool dueling,
                        std::size_t actions = 3) {
  nn::NetworkSpec spec;
  spec.features = state - spec.positions;
  spec.hidden = std::move(hidden);
  spec.dueling = dueling;
  spec.actions = actions;
  return spec;
}

// Every network the kernels are compiled for, by its widths: a state in each compiled width
// (24, 50 and 100 values), hidden layers as wide as each compiled width and narrower, depths 1
// to 4, dueling on and off.
std::vector<nn::NetworkSpec> compiled_networks() {
  std::vector<nn::NetworkSpec> out;
  for (std::size_t state : {24, 50, 100}) {
    for (std::size_t width : {20, 32, 48, 64, 100, 128}) {
      for (std::size_t depth = 1; depth <= 4; ++depth) {
        for (bool dueling : {false, true})
          out.push_back(spec_of(state, std::vector<std::size_t>(depth, width), dueling));
      }
    }
  }
  return out;
}

TEST(FusedPlan, ShapesFollowTheParameterLayout) {
  const nn::NetworkSpec spec = spec_of(24, {64, 32}, true);
  const nn::ParameterLayout layout(spec);
  const fused::Shape s = fused::shape_of(spec);
  ASSERT_EQ(s.hidden, 2);
  EXPECT_TRUE(s.dueling);
  EXPECT_EQ(s.size, layout.size());
  for (int l = 0; l <= s.hidden; ++l) {
    EXPECT_EQ(static_cast<std::size_t>(s.inputs[l]), layout.weight(l).rows);
    EXPECT_EQ(static_cast<std::size_t>(s.outputs[l]), layout.weight(l).cols);
    EXPECT_EQ(s.weight[l], layout.weight(l).offset);
    EXPECT_EQ(s.bias[l], layout.bias(l).offset);
  }
  EXPECT_EQ(s.outputs[2], 4);  // the value and three advantages
}

TEST(FusedPlan, KernelsAreCompiledForNarrowNetworksAndEveryOneIsReachableOnHopper) {
  for (const nn::NetworkSpec& spec : compiled_networks()) {
    SCOPED_TRACE(nn::describe(spec));
    const fused::Shape s = fused::shape_of(spec);
    EXPECT_TRUE(fused::compiled(s));
    // The largest compiled network's smallest chunk fits a Hopper block, so that no compiled
    // kernel is one that no device of the build's target runs.
    EXPECT_TRUE(fused::fits(s, hopper().dynamic_shared));
    const fused::Geometry g = fused::geometry(s);
    EXPECT_EQ(g.in, spec.state_size() <= 32 ? 32 : spec.state_size() <= 64 ? 64 : 128);
    EXPECT_EQ(g.width, spec.hidden[0] <= 32 ? 32 : spec.hidden[0] <= 64 ? 64 : 128);
  }
  EXPECT_FALSE(fused::compiled(fused::shape_of(spec_of(24, {64, 64, 64, 64, 64}, false))));
  EXPECT_FALSE(fused::compiled(fused::shape_of(spec_of(24, {129}, false))));
  EXPECT_FALSE(fused::compiled(fused::shape_of(spec_of(129, {64}, false))));
  EXPECT_FALSE(fused::compiled(fused::shape_of(spec_of(24, {64}, false, 9))));
  EXPECT_FALSE(fused::compiled(fused::shape_of(spec_of(24, {64}, true, 8))));  // 9 outputs
  EXPECT_TRUE(fused::compiled(fused::shape_of(spec_of(24, {64}, true, 7))));
  // A block smaller than the smallest chunk takes nothing.
  const fused::Shape widest = fused::shape_of(spec_of(100, {128, 128, 128, 128}, false));
  EXPECT_FALSE(fused::fits(widest, fused::smem_layout(widest, 16, 16, 1).bytes - 1));
}

// A part of shared memory: where it starts and the bytes the kernels touch in it.
struct Part {
  std::string name;
  std::size_t at, bytes;
};

// The parts a block touches for layout m of shape s, sized from what the kernels read and write
// (rows of 16-byte chunks, the last row's chunks whole): each held weight set's layers' weights
// (in_pad rows of out_pad values) and biases (bf16; the head's float), act[l] (rows of l's
// inputs), the scratch parts (R rows of the widest layer), the heads' outputs (ldq floats a
// row).
// A part's name: a stem and its indices, appended (GCC 12 at -O3 in C++20 warns, falsely, of
// overlapping copies in `"w" + std::to_string(...)`).
std::string label(const char* stem, int i, int j = -1) {
  std::string out(stem);
  out += std::to_string(i);
  if (j >= 0)
    out += std::to_string(j);
  return out;
}

std::vector<Part> parts(const fused::Shape& s, const fused::Smem& m) {
  std::vector<Part> out;
  const int head = s.hidden;
  for (int set = 0; set < m.sets; ++set) {
    for (int l = 0; l <= head; ++l) {
      out.push_back({label("w", set, l), m.w[set][l],
                     2 * (static_cast<std::size_t>(m.in_pad[l] - 1) * m.ldw[l] + m.out_pad[l])});
      out.push_back({label("b", set, l), m.b[set][l],
                     static_cast<std::size_t>(m.out_pad[l]) * (l == head ? 4 : 2)});
    }
  }
  const std::size_t all_rows = 2 * static_cast<std::size_t>(m.rows) + m.environment_rows;
  for (int l = 0; l <= head; ++l) {
    const std::size_t rows = all_rows - (l == 0 ? 0 : m.skip);
    out.push_back({label("act", l), m.act[l],
                   2 * ((rows - 1) * m.lda[l] + static_cast<std::size_t>(m.in_pad[l]))});
  }
  for (int d = 0; d < 2; ++d) {
    out.push_back({label("scratch", d), m.scratch[d],
                   2 * (static_cast<std::size_t>(m.rows - 1) * m.ldd + (m.ldd - fused::kPad))});
  }
  out.push_back({"q_online", m.q_online, 4 * all_rows * m.ldq});
  out.push_back({"q_target", m.q_target, 4 * static_cast<std::size_t>(m.rows) * m.ldq});
  return out;
}

// Whether the eight rows of an 8 x 8 load (ld values apart, bf16) start in eight different
// 16-byte groups of the 128 bytes the banks span.
bool spreads_banks(int ld) {
  std::vector<int> groups;
  for (int r = 0; r < 8; ++r)
    groups.push_back(r * ld * 2 % 128 / 16);
  std::sort(groups.begin(), groups.end());
  return std::unique(groups.begin(), groups.end()) == groups.end();
}

TEST(FusedPlan, SharedPartsAreAlignedDisjointAndWithinTheBlocksBytes) {
  int layouts = 0;
  for (const nn::NetworkSpec& spec : compiled_networks()) {
    const fused::Shape s = fused::shape_of(spec);
    const int head = s.hidden;
    for (int rows : {16, 32, 64, 128}) {
      for (int environments : {16, 48, 64}) {
        for (int sets : {1, 2}) {
          SCOPED_TRACE(nn::describe(spec) + ", " + std::to_string(rows) + " rows, " +
                       std::to_string(environments) + " environments' rows, " +
                       std::to_string(sets) + " sets");
          const fused::Smem m = fused::smem_layout(s, rows, environments, sets);
          ++layouts;
          EXPECT_EQ(m.skip, sets == 1 ? rows : 0);
          for (int l = 0; l <= head; ++l) {
            EXPECT_GE(m.in_pad[l], s.inputs[l]);
            EXPECT_GE(m.out_pad[l], s.outputs[l]);
            EXPECT_EQ(m.in_pad[l] % 16, 0);
            EXPECT_EQ(m.out_pad[l] % 16, 0);
            EXPECT_TRUE(spreads_banks(m.ldw[l]) && spreads_banks(m.lda[l]));
            if (sets == 1) {
              EXPECT_EQ(m.w[1][l], m.w[0][l]);  // the one set's slot serves both
            }
          }
          EXPECT_TRUE(spreads_banks(m.ldd));
          EXPECT_GE(m.ldd - fused::kPad, *std::max_element(m.out_pad, m.out_pad + head + 1));
          EXPECT_GE(m.ldq, s.outputs[head]);
          EXPECT_TRUE(m.ldq == 4 || m.ldq == fused::kMaxHead);
          std::vector<Part> p = parts(s, m);
          std::sort(p.begin(), p.end(), [](const Part& a, const Part& b) { return a.at < b.at; });
          for (std::size_t i = 0; i < p.size(); ++i) {
            EXPECT_EQ(p[i].at % 128, 0u) << p[i].name;
            const std::size_t end = i + 1 < p.size() ? p[i + 1].at : m.bytes;
            EXPECT_LE(p[i].at + p[i].bytes, end) << p[i].name << " runs into the next part";
          }
          // No more than the parts rounded to 128 bytes.
          std::size_t needed = 0;
          for (const Part& part : p)
            needed += (part.bytes + 127) / 128 * 128;
          EXPECT_LE(m.bytes, needed + 128 * p.size());
        }
      }
    }
  }
  EXPECT_GT(layouts, 1000);
}

TEST(FusedPlan, AWeightSetsPiecesLoadIntoTheirPartsAndNoFurther) {
  for (bool aligned : {true, false}) {
    for (const nn::NetworkSpec& spec : {spec_of(24, {128, 128}, false), spec_of(50, {20}, true),
                                        spec_of(100, {48, 64, 100}, false)}) {
      SCOPED_TRACE(nn::describe(spec) + (aligned ? ", aligned" : ", unaligned"));
      const fused::Shape s = fused::shape_of(spec);
      const fused::Smem m = fused::smem_layout(s, 32, 16, 2);
      fused::WeightPiece pieces[2][fused::kMaxPieces];
      fused::describe_pieces(s, m, aligned, pieces);
      const int head = s.hidden;
      for (int slot = 0; slot < 2; ++slot) {
        for (int k = 0; k < fused::pieces_per_set(head); ++k) {
          const fused::WeightPiece& w = pieces[slot][k];
          const bool bias = k > head;
          const int l = bias ? k - head - 1 : k;
          EXPECT_EQ(w.from, bias ? s.bias[l] : s.weight[l]);
          EXPECT_EQ(w.to, bias ? m.b[slot][l] : m.w[slot][l]);
          EXPECT_EQ(w.cols, s.outputs[l]);
          EXPECT_EQ(w.rows, bias ? 1 : s.inputs[l]);
          // Whole 16-byte copies only where every row of the source is whole aligned chunks.
          EXPECT_EQ(w.runs != 0, aligned && s.outputs[l] % 8 == 0 && w.from % 8 == 0);
          // Its chunks: rows_pad rows of 8 << shift values, covering the padded row and no
          // more than the part (the next part starts where its bytes end).
          const int row_values = 8 << w.shift;
          EXPECT_EQ(row_values, m.out_pad[l]);
          const std::size_t last = bias ? static_cast<std::size_t>(row_values) * 2
                                        : 2 * (static_cast<std::size_t>(w.rows_pad - 1) * w.ld_to +
                                               static_cast<std::size_t>(row_values));
          const std::size_t part =
              bias ? m.out_pad[l] * 2 : 2 * static_cast<std::size_t>(m.in_pad[l]) * m.ldw[l];
          EXPECT_LE(last, part);
          if (!bias) {
            EXPECT_EQ(w.rows_pad, m.in_pad[l]);
          }
        }
      }
    }
  }
}

TEST(FusedPlan, AMembersPartsAreItsChunksGradientsAndSums) {
  // 24-128-128-3: 24 x 128 + 128 + 128 x 128 + 128 + 128 x 3 + 3 = 20,099 parameters, rounded
  // to 20,100 floats a chunk; a batch of 256 in chunks of 16 is 16 chunks, each also 11 sums.
  const fused::Shape s = fused::shape_of(spec_of(24, {128, 128}, false));
  EXPECT_EQ(fused::part_stride(s), 20100u);
  EXPECT_EQ(fused::member_bytes(s, 256), 16u * (20100u * 4 + 11 * 8));
  EXPECT_EQ(fused::member_bytes(s, 100), 7u * (20100u * 4 + 11 * 8));  // 100 = 6 x 16 + 4
}

// The defaults' network, 24-128-128-3, on the Hopper model: fill is 99 of 132 multiprocessors.
TEST(FusedPlan, ChunksAreTheLargestThatFillTheDeviceInOneWave) {
  const fused::Device device = hopper();
  const fused::Shape s = fused::shape_of(spec_of(24, {128, 128}, false));
  auto chunk = [&](std::size_t members, std::size_t batch, std::size_t environments) {
    return fused::chunking(s, members, batch, environments, device);
  };
  // One member: no size fills 99 (16 chunks at most): the smallest, for the most blocks.
  fused::Chunking c = chunk(1, 256, 64);
  EXPECT_EQ(c.rows, 16);
  EXPECT_EQ(c.chunks, 16);
  EXPECT_EQ(c.sets, 2);
  EXPECT_EQ(c.environment_rows, 16);  // 64 environments over 16 chunks: 4 each, one pass of 16
  // 600 environments over 16 chunks: 38 each, a pass of 48 rows.
  EXPECT_EQ(chunk(1, 256, 600).environment_rows, 48);
  // 8 members: 128 chunks of 16 fill and fit; 64 of 32 do not fill.
  c = chunk(8, 256, 64);
  EXPECT_EQ(c.rows, 16);
  EXPECT_EQ(c.chunks, 16);
  // 64 members: chunks of 128, 128 blocks, fill 99 and fit 132 at once.
  c = chunk(64, 256, 64);
  EXPECT_EQ(c.rows, 128);
  EXPECT_EQ(c.chunks, 2);
  EXPECT_EQ(fused::waves(s, c, 64, device), 1u);
  // 128 members: 256 blocks even at 128 samples: no size runs in one wave; the largest, in the
  // fewest (two).
  c = chunk(128, 256, 64);
  EXPECT_EQ(c.rows, 128);
  EXPECT_EQ(fused::waves(s, c, 128, device), 2u);
  // 16 members: 64 of 64 do not fill; 128 of 32 fill and fit.
  c = chunk(16, 256, 64);
  EXPECT_EQ(c.rows, 32);
  EXPECT_EQ(c.chunks, 8);
  // A batch of 100 at 64 members: 1 chunk of 128 is 64 blocks; 2 of 64 are 128.
  c = chunk(64, 100, 64);
  EXPECT_EQ(c.rows, 64);
  EXPECT_EQ(c.chunks, 2);
}

TEST(FusedPlan, AChunkHoldsOneWeightSetWhereTwoDoNotFit) {
  const fused::Device device = hopper();
  // 100-128x4-3: a set is about 146 KB: two never fit, one does at every chunk size.
  const fused::Shape wide = fused::shape_of(spec_of(100, {128, 128, 128, 128}, false));
  for (std::size_t members : {1, 64}) {
    const fused::Chunking c = fused::chunking(wide, members, 256, 64, device);
    EXPECT_EQ(c.sets, 1);
    EXPECT_LE(fused::smem_layout(wide, c.rows, c.environment_rows, c.sets).bytes,
              device.dynamic_shared);
    EXPECT_GT(fused::smem_layout(wide, c.rows, c.environment_rows, 2).bytes, device.dynamic_shared);
  }
  // 24-32-3: two sets at 128 rows and 64 environments' rows.
  const fused::Shape narrow = fused::shape_of(spec_of(24, {32}, false));
  const fused::Chunking c = fused::chunking(narrow, 64, 256, 4096, device);
  EXPECT_EQ(c.rows, 128);
  EXPECT_EQ(c.sets, 2);
  EXPECT_EQ(c.environment_rows, 64);
}

}  // namespace
}  // namespace dqntrader
