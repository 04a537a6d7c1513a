#include "dqntrader/train/fused/plan.hpp"

#include <algorithm>
#include <string>

#include "dqntrader/core/error.hpp"

namespace dqntrader::train::fused {

Shape shape_of(const nn::NetworkSpec& spec) {
  const nn::ParameterLayout layout(spec);
  Shape shape;
  shape.hidden = static_cast<int>(layout.hidden_layers());
  if (shape.hidden > kMaxHidden)
    return shape;
  for (std::size_t l = 0; l < layout.layers(); ++l) {
    shape.inputs[l] = static_cast<int>(layout.weight(l).rows);
    shape.outputs[l] = static_cast<int>(layout.weight(l).cols);
    shape.weight[l] = layout.weight(l).offset;
    shape.bias[l] = layout.bias(l).offset;
  }
  shape.size = layout.size();
  shape.dueling = spec.dueling;
  return shape;
}

namespace {

int padded(int n) {
  for (int w : kWidths) {
    if (n <= w)
      return w;
  }
  return 0;
}

}  // namespace

Geometry geometry(const Shape& s) {
  Geometry g;
  g.in = padded(s.inputs[0]);
  for (int l = 0; l < s.hidden; ++l)
    g.width = std::max(g.width, padded(s.outputs[l]));
  return g;
}

int width_index(int width) {
  for (int i = 0; i < 3; ++i) {
    if (kWidths[i] == width)
      return i;
  }
  throw InputError("fused step: no kernel for a width of " + std::to_string(width));
}

Smem smem_layout(const Shape& s, int rows, int environment_rows, int sets) {
  constexpr std::size_t bf = 2;  // bytes of a bf16 value
  const Geometry g = geometry(s);
  Smem m{};
  m.rows = rows;
  m.environment_rows = environment_rows;
  m.sets = sets;
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += (bytes + 127) / 128 * 128;
    return here;
  };
  m.skip = sets == 1 ? rows : 0;
  const std::size_t online_rows = 2 * static_cast<std::size_t>(rows) + environment_rows;
  int widest = 0;
  for (int l = 0; l <= s.hidden; ++l) {
    m.in_pad[l] = l == 0 ? g.in : g.width;
    m.out_pad[l] = l == s.hidden ? kHeadPad : g.width;
    m.ldw[l] = m.out_pad[l] + kPad;
    m.lda[l] = m.in_pad[l] + kPad;
    widest = std::max(widest, m.out_pad[l]);
  }
  for (int set = 0; set < 2; ++set) {
    for (int l = 0; l <= s.hidden; ++l) {
      if (set < sets) {
        m.w[set][l] = take(static_cast<std::size_t>(m.in_pad[l]) * m.ldw[l] * bf);
        m.b[set][l] =
            take(static_cast<std::size_t>(m.out_pad[l]) * (l == s.hidden ? sizeof(float) : bf));
      } else {
        m.w[set][l] = m.w[0][l];
        m.b[set][l] = m.b[0][l];
      }
    }
  }
  for (int l = 0; l <= s.hidden; ++l)
    m.act[l] = take((online_rows - (l == 0 ? 0 : m.skip)) * m.lda[l] * bf);
  m.ldd = widest + kPad;
  for (std::size_t& d : m.scratch)
    d = take(static_cast<std::size_t>(rows) * m.ldd * bf);
  m.ldq = s.outputs[s.hidden] <= 4 ? 4 : kMaxHead;
  m.q_online = take(online_rows * m.ldq * sizeof(float));
  m.q_target = take(static_cast<std::size_t>(rows) * m.ldq * sizeof(float));
  m.bytes = at;
  return m;
}

void describe_pieces(const Shape& s, const Smem& sm, bool aligned,
                     WeightPiece (&pieces)[2][kMaxPieces]) {
  const int head = s.hidden;
  for (int slot = 0; slot < 2; ++slot) {
    for (int k = 0; k < pieces_per_set(head); ++k) {
      const bool bias = k > head;
      const int l = bias ? k - head - 1 : k;
      WeightPiece& w = pieces[slot][k];
      w.from = bias ? s.bias[l] : s.weight[l];
      w.to = static_cast<unsigned>(bias ? sm.b[slot][l] : sm.w[slot][l]);
      w.rows = bias ? 1 : s.inputs[l];
      w.cols = s.outputs[l];
      w.rows_pad = bias ? 1 : sm.in_pad[l];
      w.shift = chunk_shift(sm.out_pad[l]);
      w.ld_to = bias ? 0 : sm.ldw[l];
      w.runs = aligned && w.cols % 8 == 0 && w.from % 8 == 0 ? 1 : 0;
    }
  }
}

std::size_t part_stride(const Shape& s) {
  return (s.size + 3) / 4 * 4;
}

std::size_t member_bytes(const Shape& shape, std::size_t batch) {
  const std::size_t chunks = (batch + kFewestRows - 1) / kFewestRows;
  return chunks * (part_stride(shape) * sizeof(float) + kSums * sizeof(double));
}

bool compiled(const Shape& shape) {
  if (shape.hidden < 1 || shape.hidden > kMaxHidden || shape.inputs[0] > kMaxWidth)
    return false;
  for (int l = 0; l < shape.hidden; ++l) {
    if (shape.outputs[l] > kMaxWidth)
      return false;
  }
  return shape.outputs[shape.hidden] <= kMaxHead;
}

bool fits(const Shape& shape, std::size_t dynamic_shared) {
  return compiled(shape) && smem_layout(shape, kFewestRows, 16, 1).bytes <= dynamic_shared;
}

namespace {

// The blocks the device runs at once with `shared` bytes of dynamic shared memory each.
std::size_t resident_blocks(const Device& device, std::size_t shared) {
  return static_cast<std::size_t>(std::max(device.resident(shared), 1)) *
         static_cast<std::size_t>(device.multiprocessors);
}

}  // namespace

Chunking chunking(const Shape& shape, std::size_t members, std::size_t batch,
                  std::size_t environments, const Device& device) {
  if (!fits(shape, device.dynamic_shared))
    throw InputError("fused step: a network of this shape is not one it takes");
  const std::size_t fill = static_cast<std::size_t>(device.multiprocessors) * 3 / 4;
  auto environment_rows = [&](int rows, int sets) {
    const std::size_t chunks = (batch + rows - 1) / rows;
    const int share = static_cast<int>((environments + chunks - 1) / chunks);
    for (int e = std::min(kEnvironmentRows, pad16(share)); e >= 16; e -= 16) {
      if (smem_layout(shape, rows, e, sets).bytes <= device.dynamic_shared)
        return e;
    }
    return smem_layout(shape, rows, 16, sets).bytes <= device.dynamic_shared ? 16 : 0;
  };
  Chunking fits[4];
  int count = 0;
  for (int rows : {kMaxRows, 64, 32, kFewestRows}) {
    for (int sets : {2, 1}) {
      if (const int e = environment_rows(rows, sets); e > 0) {
        fits[count++] = Chunking{rows, sets, e, static_cast<int>((batch + rows - 1) / rows)};
        break;
      }
    }
  }
  auto blocks = [&](const Chunking& c) { return members * static_cast<std::size_t>(c.chunks); };
  auto one_wave = [&](const Chunking& c) { return waves(shape, c, members, device) == 1; };
  for (int i = 0; i < count; ++i) {
    if (blocks(fits[i]) >= fill && one_wave(fits[i]))
      return fits[i];
  }
  for (int i = count - 1; i >= 0; --i) {
    if (one_wave(fits[i]))
      return fits[i];
  }
  return fits[0];
}

std::size_t waves(const Shape& shape, const Chunking& c, std::size_t members,
                  const Device& device) {
  const std::size_t at_once =
      resident_blocks(device, smem_layout(shape, c.rows, c.environment_rows, c.sets).bytes);
  return (members * static_cast<std::size_t>(c.chunks) + at_once - 1) / at_once;
}

}  // namespace dqntrader::train::fused
