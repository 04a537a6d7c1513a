// Arithmetic modes of matrix products.
#pragma once

#include <string>

namespace dqntrader {

/// How a matrix product computes.
///  - fp32: float operands, float arithmetic.
///  - tf32: float operands rounded to TF32 (10-bit mantissa) inside tensor cores,
///          float accumulation.
///  - bf16: bf16 operands, float accumulation; the result is float or bf16.
/// On the OpenMP backend every mode computes in full float (there are no such units);
/// bf16 operands are widened exactly to float there.
enum class Precision { fp32, tf32, bf16 };

/// "fp32", "tf32" or "bf16".
const char* to_string(Precision precision);

/// Parses "fp32", "tf32" or "bf16"; throws InputError otherwise.
Precision parse_precision(const std::string& text);

}  // namespace dqntrader
