#include "dqntrader/core/precision.hpp"

#include "dqntrader/core/error.hpp"

namespace dqntrader {

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::bf16:
      return "bf16";
  }
  return "unknown";
}

Precision parse_precision(const std::string& text) {
  if (text == "fp32")
    return Precision::fp32;
  if (text == "tf32")
    return Precision::tf32;
  if (text == "bf16")
    return Precision::bf16;
  throw InputError("unknown precision '" + text + "' (expected fp32, tf32 or bf16)");
}

}  // namespace dqntrader
