// Helpers shared by the tests: seeded fresh random inputs, host/device transfers, files read
// back and child processes.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <Kokkos_Core.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"

namespace dqntrader::testing {

/// Every test draws fresh inputs: the seed comes from the clock-independent random device
/// unless DQNTRADER_TEST_SEED fixes it; tests print it with SCOPED_TRACE so a failure can
/// be replayed.
inline std::uint64_t test_seed() {
  if (const char* fixed = std::getenv("DQNTRADER_TEST_SEED")) {
    return std::strtoull(fixed, nullptr, 10);
  }
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

inline std::string seed_note(std::uint64_t seed) {
  return "replay with DQNTRADER_TEST_SEED=" + std::to_string(seed);
}

/// A whole file's bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A JSON file, parsed.
inline nlohmann::json json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

/// Every line of a JSON-lines file (metrics.jsonl), parsed.
inline std::vector<nlohmann::json> jsonl_records(const std::filesystem::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    out.push_back(nlohmann::json::parse(line));
  return out;
}

/// Starts `/bin/sh -c command` in a child process with its output discarded; its pid (the
/// shell execs the command, so the pid is the command's when it begins with exec).
inline pid_t spawn_quiet(const std::string& command) {
  const pid_t child = fork();
  if (child == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return child;
}

/// Values uniform in [-1, -0.05] U [0.05, 1]: never zero, both signs.
inline std::vector<float> random_values(std::mt19937_64& rng, std::size_t count) {
  std::uniform_real_distribution<float> magnitude(0.05f, 1.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(count);
  for (float& v : values)
    v = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return values;
}

/// A device matrix holding values (row-major, rows x cols), converted by convert.
template <class T, class Convert>
Matrix<T> to_device(const std::vector<float>& values, std::size_t rows, std::size_t cols,
                    Convert convert, const std::string& label = "test::matrix") {
  Matrix<T> device(label, rows, cols);
  auto host = Kokkos::create_mirror_view(device);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j)
      host(i, j) = convert(values[i * cols + j]);
  }
  Kokkos::deep_copy(device, host);
  return device;
}

/// The matrix's values as floats, row-major, converted by convert.
template <class T, class Convert>
std::vector<float> to_host(const Matrix<T>& device, Convert convert) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), device);
  std::vector<float> values(device.extent(0) * device.extent(1));
  for (std::size_t i = 0; i < device.extent(0); ++i) {
    for (std::size_t j = 0; j < device.extent(1); ++j) {
      values[i * device.extent(1) + j] = convert(host(i, j));
    }
  }
  return values;
}

/// A device vector holding values.
template <class T>
Kokkos::View<T*, DeviceMemory> upload(const std::vector<T>& values) {
  Kokkos::View<T*, DeviceMemory> device("test::upload", values.size());
  auto host = Kokkos::create_mirror_view(device);
  for (std::size_t i = 0; i < values.size(); ++i)
    host(i) = values[i];
  Kokkos::deep_copy(device, host);
  return device;
}

/// The values of a device vector.
template <class V>
std::vector<typename V::non_const_value_type> download(const V& device) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), device);
  return std::vector<typename V::non_const_value_type>(host.data(), host.data() + host.extent(0));
}

}  // namespace dqntrader::testing
