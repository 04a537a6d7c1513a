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

// The graph under construction: initializers, nodes, inputs and outputs, each named.
class Graph {
 public:
  explicit Graph(onnx::GraphProto& graph) : m_graph(graph) {}

  std::string doubles(const std::string& name, const std::vector<double>& values,
                      std::vector<std::int64_t> dims) {
    onnx::TensorProto& t = tensor(name, onnx::TensorProto::DOUBLE, dims);
    for (double v : values)
      t.add_double_data(v);
    return name;
  }
  std::string floats(const std::string& name, const float* values, std::size_t count,
                     std::vector<std::int64_t> dims) {
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

  void value(onnx::ValueInfoProto& v, const std::string& name, int type,
             std::vector<std::int64_t> dims, const std::string& doc) {
    v.set_name(name);
    v.set_doc_string(doc);
    onnx::TypeProto_Tensor& t = *v.mutable_type()->mutable_tensor_type();
    t.set_elem_type(type);
    for (std::int64_t d : dims)
      t.mutable_shape()->add_dim()->set_dim_value(d);
  }
  void input(const std::string& name, int type, std::vector<std::int64_t> dims,
             const std::string& doc) {
    value(*m_graph.add_input(), name, type, dims, doc);
  }
  void output(const std::string& name, int type, std::vector<std::int64_t> dims,
              const std::string& doc) {
    value(*m_graph.add_output(), name, type, dims, doc);
  }

 private:
  onnx::TensorProto& tensor(const std::string& name, int type, std::vector<std::int64_t> dims) {
    onnx::TensorProto& t = *m_graph.add_initializer();
    t.set_name(name);
    t.set_data_type(type);
    for (std::int64_t d : dims)
      t.add_dims(d);
    return t;
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

// [first, first + 1, ..., first + count - 1], or descending with step -1.
std::vector<std::int64_t> indices(std::int64_t first, std::int64_t count, std::int64_t step) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < count; ++i)
    out.push_back(first + i * step);
  return out;
}

}  // namespace

std::string onnx_model(const PolicyFile& policy, const std::string& source) {
  const data::FeatureSpec& f = policy.features;
  const nn::NetworkSpec& n = policy.network;
  const nn::ParameterLayout layout(n);
  const auto warmup = static_cast<std::int64_t>(f.warmup());
  const std::int64_t R = f.return_window, V = f.volatility_window, O = f.ofi_window;
  const auto E = static_cast<std::int64_t>(f.extra.size());
  const auto F = static_cast<std::int64_t>(f.count());
  const auto K = static_cast<std::int64_t>(n.positions), A = static_cast<std::int64_t>(n.actions);

  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("dqntrader");
  model.set_doc_string(
      "The decision of a dqntrader policy (docs/POLICY.md): the raw bars and the incoming "
      "position in, the Q-values and the greedy action out.");
  onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOpset);
  auto meta = [&](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto& p = *model.add_metadata_props();
    p.set_key(key);
    p.set_value(value);
  };
  meta("dqntrader.policy", source);
  meta("dqntrader.positions", nlohmann::json(policy.positions).dump());
  meta("dqntrader.warmup", std::to_string(warmup));
  meta("dqntrader.ofi_window", std::to_string(O));
  meta("dqntrader.extra", nlohmann::json(f.extra).dump());
  meta("dqntrader.features", nlohmann::json(f.names()).dump());
  meta("dqntrader.network", nn::describe(n));
  meta("dqntrader.info", policy.info.dump());

  onnx::GraphProto& proto = *model.mutable_graph();
  proto.set_name("dqntrader_decision");
  Graph g(proto);
  g.input("closes", onnx::TensorProto::DOUBLE, {warmup + 1},
          "the closes of bars t - W .. t, oldest first (W = " + std::to_string(warmup) +
              ", the warm-up)");
  if (O > 0) {
    g.input("ofi", onnx::TensorProto::DOUBLE, {O},
            "the ofi of bars t - " + std::to_string(O - 1) + " .. t, oldest first");
  }
  if (E > 0) {
    g.input("extra", onnx::TensorProto::DOUBLE, {E},
            "the extra columns at bar t, in the order " + nlohmann::json(f.extra).dump());
  }
  g.input("position", onnx::TensorProto::FLOAT, {K},
          "the one-hot of the incoming position among " + nlohmann::json(policy.positions).dump());
  g.output("q", onnx::TensorProto::FLOAT, {1, A}, "the Q-value of each action");
  g.output("action", onnx::TensorProto::INT64, {1},
           "the greedy action (the first of equal Q-values); its position is positions[action]");

  // 1. Raw features, in double: lr[k] = ln(C[k + 1] / C[k]) for k = 0 .. W - 1 (lr[W - 1] is
  // bar t's); ret_j = lr[W - 1 - j]; vol = sqrt(sum of squared deviations / (V - 1)) over the
  // last V; ofi_j = ofi[O - 1 - j]; the extra columns.
  g.node("Slice",
         {"closes", g.integers("c_later_start", {1}), g.integers("c_later_end", {warmup + 1})},
         "closes_later");
  g.node("Slice",
         {"closes", g.integers("c_earlier_start", {0}), g.integers("c_earlier_end", {warmup})},
         "closes_earlier");
  g.node("Div", {"closes_later", "closes_earlier"}, "price_ratio");
  g.node("Log", {"price_ratio"}, "log_returns");
  g.node("Gather", {"log_returns", g.integers("ret_indices", indices(warmup - 1, R, -1))}, "ret");
  g.node("Slice",
         {"log_returns", g.integers("vol_start", {warmup - V}), g.integers("vol_end", {warmup})},
         "vol_window");
  attribute_ints(g.node("ReduceMean", {"vol_window"}, "vol_mean"), "axes", {0});
  g.node("Sub", {"vol_window", "vol_mean"}, "vol_deviation");
  g.node("Mul", {"vol_deviation", "vol_deviation"}, "vol_square");
  g.node("ReduceSum", {"vol_square", g.integers("vol_axes", {0})}, "vol_sum");
  g.node("Div", {"vol_sum", g.doubles("vol_divisor", {static_cast<double>(V - 1)}, {1})},
         "vol_variance");
  g.node("Sqrt", {"vol_variance"}, "vol");
  std::vector<std::string> parts = {"ret", "vol"};
  if (O > 0) {
    g.node("Gather", {"ofi", g.integers("ofi_indices", indices(O - 1, O, -1))}, "ofi_lags");
    parts.push_back("ofi_lags");
  }
  if (E > 0)
    parts.push_back("extra");
  attribute_int(g.node("Concat", parts, "raw_double"), "axis", 0);
  // Each stored as float32, as the device stores them.
  attribute_int(g.node("Cast", {"raw_double"}, "raw_float"), "to", onnx::TensorProto::FLOAT);
  attribute_int(g.node("Cast", {"raw_float"}, "raw"), "to", onnx::TensorProto::DOUBLE);

  // 2. Standardization in double with the training window's statistics, then float32.
  std::vector<double> inverse;
  for (double s : policy.stats.stdev)
    inverse.push_back(1.0 / s);
  g.node("Sub", {"raw", g.doubles("feature_mean", policy.stats.mean, {F})}, "centred");
  g.node("Mul", {"centred", g.doubles("feature_inverse_stdev", inverse, {F})}, "standardized");
  attribute_int(g.node("Cast", {"standardized"}, "features"), "to", onnx::TensorProto::FLOAT);

  // 3. The state: the features, then the incoming position's one-hot, as one row.
  attribute_int(g.node("Concat", {"features", "position"}, "state_vector"), "axis", 0);
  g.node("Reshape", {"state_vector", g.integers("state_shape", {1, F + K})}, "state");

  // 4. The network in float32: hidden layers Gemm + ReLU, then the head.
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
    g.node("Gemm", {h, weight, bias}, out);
    if (l < hidden) {
      g.node("Relu", {out}, name);
      h = name;
    }
  }
  if (n.dueling) {
    // Q_a = V + A_a - mean(A): column 0 the value, columns 1 .. A the advantages.
    g.node("Slice",
           {"head_out", g.integers("value_start", {0}), g.integers("value_end", {1}),
            g.integers("head_axes", {1})},
           "value");
    g.node("Slice",
           {"head_out", g.integers("advantage_start", {1}), g.integers("advantage_end", {A + 1}),
            "head_axes"},
           "advantage");
    attribute_ints(g.node("ReduceMean", {"advantage"}, "advantage_mean"), "axes", {1});
    g.node("Add", {"value", "advantage"}, "value_advantage");
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

void write_onnx_model(const std::string& path, const PolicyFile& policy,
                      const std::string& source) {
  io::write_file_atomically(path, onnx_model(policy, source));
}

}  // namespace dqntrader::eval
