#include "dqntrader/eval/onnx_export.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dqntrader/core/error.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader::eval {

namespace {

constexpr std::int64_t kIrVersion = 8;  // the highest ONNX 1.12's checker accepts
constexpr std::int64_t kOpset = 17;     // likewise; ReduceMean takes its axes as an attribute

using Dims = std::vector<std::int64_t>;
constexpr std::int64_t kRows = -1;  // the rows' axis, of any length ("N")

// The graph under construction: initializers, nodes, inputs and outputs, each named.
class Graph {
 public:
  explicit Graph(onnx::GraphProto& graph) : m_graph(graph) {}

  // A constant of element type (DOUBLE or FLOAT) holding values.
  std::string constant(const std::string& name, int type, const std::vector<double>& values,
                       const Dims& dims) {
    onnx::TensorProto& t = tensor(name, type, dims);
    for (double v : values) {
      if (type == onnx::TensorProto::DOUBLE)
        t.add_double_data(v);
      else
        t.add_float_data(static_cast<float>(v));
    }
    return name;
  }
  std::string floats(const std::string& name, const float* values, std::size_t count,
                     const Dims& dims) {
    onnx::TensorProto& t = tensor(name, onnx::TensorProto::FLOAT, dims);
    for (std::size_t i = 0; i < count; ++i)
      t.add_float_data(values[i]);
    return name;
  }
  std::string integers(const std::string& name, const std::vector<std::int64_t>& values) {
    onnx::TensorProto& t =
        tensor(name, onnx::TensorProto::INT64, {static_cast<std::int64_t>(values.size())});
    for (std::int64_t v : values)
      t.add_int64_data(v);
    return name;
  }

  // A node of op with inputs; its one output is named output. Attributes are added to the
  // node returned.
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::string& output) {
    onnx::NodeProto& n = *m_graph.add_node();
    n.set_op_type(op);
    n.set_name(output);
    for (const std::string& i : inputs)
      n.add_input(i);
    n.add_output(output);
    return n;
  }

  void input(const std::string& name, int type, const Dims& dims, const std::string& doc) {
    value(*m_graph.add_input(), name, type, dims, doc);
  }
  void output(const std::string& name, int type, const Dims& dims, const std::string& doc) {
    value(*m_graph.add_output(), name, type, dims, doc);
  }

 private:
  onnx::TensorProto& tensor(const std::string& name, int type, const Dims& dims) {
    onnx::TensorProto& t = *m_graph.add_initializer();
    t.set_name(name);
    t.set_data_type(type);
    for (std::int64_t d : dims)
      t.add_dims(d);
    return t;
  }
  void value(onnx::ValueInfoProto& v, const std::string& name, int type, const Dims& dims,
             const std::string& doc) {
    v.set_name(name);
    v.set_doc_string(doc);
    onnx::TypeProto_Tensor& t = *v.mutable_type()->mutable_tensor_type();
    t.set_elem_type(type);
    for (std::int64_t d : dims) {
      if (d == kRows)
        t.mutable_shape()->add_dim()->set_dim_param("N");
      else
        t.mutable_shape()->add_dim()->set_dim_value(d);
    }
  }

  onnx::GraphProto& m_graph;
};

void attribute_int(onnx::NodeProto& n, const std::string& name, std::int64_t value) {
  onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

void attribute_ints(onnx::NodeProto& n, const std::string& name, std::vector<std::int64_t> values) {
  onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (std::int64_t v : values)
    a.add_ints(v);
}

// A rows x cols matrix, row-major, zero but where pick(row, col) says 1.
template <class Pick>
std::vector<double> selection(std::int64_t rows, std::int64_t cols, Pick pick) {
  std::vector<double> m(static_cast<std::size_t>(rows * cols), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c)
      m[static_cast<std::size_t>(r * cols + c)] = pick(r, c) ? 1.0 : 0.0;
  }
  return m;
}

}  // namespace

OnnxInputs parse_onnx_inputs(const std::string& text) {
  if (text == "float64")
    return OnnxInputs::float64;
  if (text == "float32")
    return OnnxInputs::float32;
  throw InputError(field("inputs") + " '" + text + "': expected float64 or float32");
}

std::string onnx_model(const PolicyFile& policy, const std::string& source, OnnxInputs inputs) {
  const data::FeatureSpec& f = policy.features;
  const nn::NetworkSpec& n = policy.network;
  const nn::ParameterLayout layout(n);
  const auto W = static_cast<std::int64_t>(f.warmup());
  const std::int64_t R = f.return_window, V = f.volatility_window, O = f.ofi_window;
  const auto E = static_cast<std::int64_t>(f.extra.size());
  const auto F = static_cast<std::int64_t>(f.count());
  const auto K = static_cast<std::int64_t>(n.positions), A = static_cast<std::int64_t>(n.actions);
  const bool exact = inputs == OnnxInputs::float64;
  const int T = exact ? onnx::TensorProto::DOUBLE : onnx::TensorProto::FLOAT;
  constexpr int kFloat = onnx::TensorProto::FLOAT;

  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("dqntrader");
  model.set_doc_string(
      "The decision of a dqntrader policy (docs/POLICY.md) for N rows at once: each row's raw "
      "bars and incoming position in, its Q-values and greedy action out.");
  onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOpset);
  auto meta = [&](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto& p = *model.add_metadata_props();
    p.set_key(key);
    p.set_value(value);
  };
  meta("dqntrader.policy", source);
  meta("dqntrader.inputs", exact ? "float64" : "float32");
  meta("dqntrader.positions", nlohmann::json(policy.positions).dump());
  meta("dqntrader.warmup", std::to_string(W));
  meta("dqntrader.ofi_window", std::to_string(O));
  meta("dqntrader.extra", nlohmann::json(f.extra).dump());
  meta("dqntrader.features", nlohmann::json(f.names()).dump());
  meta("dqntrader.network", nn::describe(n));
  meta("dqntrader.info", policy.info.dump());

  onnx::GraphProto& proto = *model.mutable_graph();
  proto.set_name("dqntrader_decision");
  Graph g(proto);
  g.input("closes", T, {kRows, W + 1},
          "per row the closes of bars t - W .. t, oldest first (W = " + std::to_string(W) +
              ", the warm-up)" + (exact ? "" : ", each the float32 nearest the double close"));
  if (!exact) {
    g.input("closes_low", kFloat, {kRows, W + 1},
            "per row float32(close - float32(close)) for the same bars: the rest of the double "
            "close (zeros lose about 1e-3 of the features' precision)");
  }
  if (O > 0) {
    g.input("ofi", T, {kRows, O},
            "per row the ofi of bars t - " + std::to_string(O - 1) + " .. t, oldest first");
  }
  if (E > 0) {
    g.input("extra", T, {kRows, E},
            "per row the extra columns at bar t, in the order " + nlohmann::json(f.extra).dump());
  }
  g.input("position", kFloat, {kRows, K},
          "per row the one-hot of the incoming position among " +
              nlohmann::json(policy.positions).dump());
  g.output("q", kFloat, {kRows, A}, "per row the Q-value of each action");
  g.output("action", onnx::TensorProto::INT64, {kRows},
           "per row the greedy action (the first of equal Q-values); its position is "
           "positions[action]");

  // 1. Log returns lr[k] = ln(C[k + 1] / C[k]), k = 0 .. W - 1 (lr[W - 1] is bar t's): in
  // double as the device computes them; in float32 as ln(1 + d), d = (C[k + 1] - C[k]) / C[k]
  // over the two parts of each close, with 1 + d's rounding put back.
  const std::string axis = g.integers("axis_1", {1});
  auto slice = [&](const std::string& in, const std::string& bounds, std::int64_t begin,
                   std::int64_t end, const std::string& out) {
    g.node("Slice",
           {in, g.integers(bounds + "_start", {begin}), g.integers(bounds + "_end", {end}), axis},
           out);
  };
  slice("closes", "later", 1, W + 1, "closes_later");
  slice("closes", "earlier", 0, W, "closes_earlier");
  if (exact) {
    g.node("Div", {"closes_later", "closes_earlier"}, "price_ratio");
    g.node("Log", {"price_ratio"}, "log_returns");
  } else {
    for (const char* part : {"later", "earlier"}) {
      g.node("Slice",
             {"closes_low", std::string(part) + "_start", std::string(part) + "_end", axis},
             std::string("closes_low_") + part);
    }
    g.node("Sub", {"closes_later", "closes_earlier"}, "change_high");
    g.node("Sub", {"closes_low_later", "closes_low_earlier"}, "change_low");
    g.node("Add", {"change_high", "change_low"}, "change");
    g.node("Add", {"closes_earlier", "closes_low_earlier"}, "base");
    const std::string one = g.constant("one", kFloat, {1.0}, {});
    g.node("Div", {"change", "base"}, "relative_change");                    // d
    g.node("Add", {"relative_change", one}, "growth");                       // u = fl(1 + d)
    g.node("Sub", {"growth", one}, "growth_minus_one");                      // u - 1, exact
    g.node("Sub", {"relative_change", "growth_minus_one"}, "growth_error");  // d - (u - 1)
    g.node("Div", {"growth_error", "growth"}, "log_correction");             // ln(1 + d) - ln(u)
    g.node("Log", {"growth"}, "log_growth");
    g.node("Add", {"log_growth", "log_correction"}, "log_returns");
  }

  // 2. Raw features: ret_j = lr[W - 1 - j] and ofi_j = ofi[O - 1 - j] by constant 0/1
  // products (exact); vol = sqrt(sum of squared deviations / (V - 1)) over the last V; the
  // extra columns.
  g.node("MatMul",
         {"log_returns",
          g.constant("ret_select", T,
                     selection(W, R, [&](auto r, auto c) { return r == W - 1 - c; }), {W, R})},
         "ret");
  slice("log_returns", "vol", W - V, W, "vol_window");
  onnx::NodeProto& mean = g.node("ReduceMean", {"vol_window"}, "vol_mean");
  attribute_ints(mean, "axes", {1});
  attribute_int(mean, "keepdims", 1);
  g.node("MatMul", {"vol_mean", g.constant("vol_ones", T, std::vector<double>(V, 1.0), {1, V})},
         "vol_mean_row");
  g.node("Sub", {"vol_window", "vol_mean_row"}, "vol_deviation");
  onnx::NodeProto& squares = g.node("ReduceSumSquare", {"vol_deviation"}, "vol_sum");
  attribute_ints(squares, "axes", {1});
  attribute_int(squares, "keepdims", 1);
  g.node("Div", {"vol_sum", g.constant("vol_divisor", T, {static_cast<double>(V - 1)}, {})},
         "vol_variance");
  g.node("Sqrt", {"vol_variance"}, "vol");
  std::vector<std::string> parts = {"ret", "vol"};
  if (O > 0) {
    g.node("MatMul",
           {"ofi",
            g.constant("ofi_select", T,
                       selection(O, O, [&](auto r, auto c) { return r == O - 1 - c; }), {O, O})},
           "ofi_lags");
    parts.push_back("ofi_lags");
  }
  if (E > 0)
    parts.push_back("extra");
  attribute_int(g.node("Concat", parts, "raw"), "axis", 1);

  // 3. Standardization with the training window's statistics: in double, of the raw features
  // rounded to float32 as the device stores them, then float32; in float32 with each mean in
  // two parts.
  std::vector<double> inverse;
  for (double s : policy.stats.stdev)
    inverse.push_back(1.0 / s);
  if (exact) {
    attribute_int(g.node("Cast", {"raw"}, "raw_float"), "to", kFloat);
    attribute_int(g.node("Cast", {"raw_float"}, "raw_rounded"), "to", onnx::TensorProto::DOUBLE);
    g.node("Sub", {"raw_rounded", g.constant("feature_mean", T, policy.stats.mean, {F})},
           "centred");
    g.node("Mul", {"centred", g.constant("feature_inverse_stdev", T, inverse, {F})},
           "standardized");
    attribute_int(g.node("Cast", {"standardized"}, "features"), "to", kFloat);
  } else {
    std::vector<double> high, low;
    for (double m : policy.stats.mean) {
      high.push_back(static_cast<float>(m));
      low.push_back(static_cast<float>(m - high.back()));
    }
    g.node("Sub", {"raw", g.constant("feature_mean_high", kFloat, high, {F})}, "centred_high");
    g.node("Sub", {"centred_high", g.constant("feature_mean_low", kFloat, low, {F})}, "centred");
    g.node("Mul", {"centred", g.constant("feature_inverse_stdev", kFloat, inverse, {F})},
           "features");
  }

  // 4. The state, then the network in float32: hidden layers MatMul, Add, Relu; the head.
  attribute_int(g.node("Concat", {"features", "position"}, "state"), "axis", 1);
  std::string h = "state";
  const std::size_t hidden = n.hidden.size();
  for (std::size_t l = 0; l <= hidden; ++l) {
    const nn::Tensor& w = layout.weight(l);
    const nn::Tensor& b = layout.bias(l);
    const std::string name = l < hidden ? "hidden" + std::to_string(l) : "head";
    const std::string weight =
        g.floats(name + "_weight", policy.parameters.data() + w.offset, w.size(),
                 {static_cast<std::int64_t>(w.rows), static_cast<std::int64_t>(w.cols)});
    const std::string bias = g.floats(name + "_bias", policy.parameters.data() + b.offset, b.size(),
                                      {static_cast<std::int64_t>(b.cols)});
    const std::string out = l < hidden ? name + "_linear" : (n.dueling ? "head_out" : "q");
    g.node("MatMul", {h, weight}, name + "_product");
    g.node("Add", {name + "_product", bias}, out);
    if (l < hidden) {
      g.node("Relu", {out}, name);
      h = name;
    }
  }
  if (n.dueling) {
    // Q_a = (V + A_a) - (A_1 + .. + A_A) / A: column 0 the value, columns 1 .. A the
    // advantages, each sum a product with a constant 0/1 matrix.
    const auto value_plus =
        selection(A + 1, A, [](auto r, auto c) { return r == 0 || r == c + 1; });
    const auto advantages = selection(A + 1, A, [](auto r, auto) { return r > 0; });
    g.node("MatMul",
           {"head_out", g.constant("value_plus_advantage", kFloat, value_plus, {A + 1, A})},
           "value_advantage");
    g.node("MatMul", {"head_out", g.constant("advantage_sums", kFloat, advantages, {A + 1, A})},
           "advantage_sum");
    g.node("Div",
           {"advantage_sum", g.constant("action_count", kFloat, {static_cast<double>(A)}, {})},
           "advantage_mean");
    g.node("Sub", {"value_advantage", "advantage_mean"}, "q");
  }
  onnx::NodeProto& argmax = g.node("ArgMax", {"q"}, "action");
  attribute_int(argmax, "axis", 1);
  attribute_int(argmax, "keepdims", 0);
  attribute_int(argmax, "select_last_index", 0);

  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error(std::string("the ONNX model fails ONNX's checker: ") + e.what());
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    throw Error("cannot serialize the ONNX model");
  return bytes;
}

void write_onnx_model(const std::string& path, const PolicyFile& policy, const std::string& source,
                      OnnxInputs inputs) {
  if (io::same_file(path, source)) {
    throw InputError("the model's path " + path + " is the policy file " + source +
                     " it is made from: writing it would destroy the policy; write elsewhere");
  }
  io::write_file_atomically(path, onnx_model(policy, source, inputs));
}

}  // namespace dqntrader::eval
