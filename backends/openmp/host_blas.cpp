// The host BLAS behind Kokkos Kernels' TPL layer: which library answers sgemm_, which core
// OpenBLAS runs, and routing OpenBLAS off a core below what the CPU can run.
//
// OpenBLAS (DYNAMIC_ARCH) picks its kernels once, in its library constructor, from the CPU it
// recognises. A CPU newer than the release may be taken for an older one: Debian's 0.3.21
// runs an AVX-512 Xeon of today on its generic Prescott kernels and this project's AMD EPYC
// machine on its Haswell (AVX2) kernels, several times below what the CPU's own kernels reach
// (docs/BENCHMARKS.md, "CPU"). Since the choice
// is made before main runs, the only way to change it is OPENBLAS_CORETYPE in the
// environment of a fresh image of the program: route_host_library() sets it and executes the
// program again, once, when the CPU has the instructions of the better core.
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "../gemm.hpp"
#include "host_blas.hpp"

extern "C" void sgemm_();  // only its address is taken (the BLAS that answers the call)

namespace dqntrader::gemm {

namespace {

constexpr const char* kRoutedFrom = "DQNTRADER_OPENBLAS_ROUTED_FROM";

using NameFunction = char* (*)();

// OpenBLAS's own report, when the BLAS is OpenBLAS (looked up at run time: no other BLAS has
// these functions).
std::string openblas_string(const char* function) {
  const auto f = reinterpret_cast<NameFunction>(dlsym(RTLD_DEFAULT, function));
  if (f == nullptr)
    return std::string();
  const char* text = f();
  return text != nullptr ? std::string(text) : std::string();
}

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

bool has_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

}  // namespace

const char* better_openblas_core(const std::string& core, bool avx512, bool avx2) {
  const bool core_avx512 = core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
  const bool core_avx2 = core_avx512 || core == "Haswell" || core == "Zen";
  if (avx512 && !core_avx512)
    return "SkylakeX";
  if (avx2 && !core_avx2)
    return "Haswell";
  return nullptr;
}

void route_host_library(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr)
    return;  // the machine's own choice (or this routing, done already)
  const std::string core = openblas_string("openblas_get_corename");
  if (core.empty())
    return;  // not OpenBLAS
  const char* target = better_openblas_core(core, has_avx512(), has_avx2());
  if (target == nullptr)
    return;
  ::setenv("OPENBLAS_CORETYPE", target, 1);
  ::setenv(kRoutedFrom, core.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  // Executing again failed: go on with the kernels loaded, and say so in the description.
  ::unsetenv("OPENBLAS_CORETYPE");
  ::setenv(kRoutedFrom, (core + " (executing again failed)").c_str(), 1);
}

std::string library_description() {
  Dl_info info{};
  const std::string path = dladdr(reinterpret_cast<void*>(&sgemm_), &info) != 0 && info.dli_fname
                               ? info.dli_fname
                               : "(unknown file)";
  const std::string config = openblas_string("openblas_get_config");
  if (config.empty())
    return "host BLAS " + path;
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words are the release.
  const std::size_t second = config.find(' ', config.find(' ') + 1);
  std::string text = config.substr(0, second) + " (" + path + "), core " +
                     openblas_string("openblas_get_corename");
  const char* routed = std::getenv(kRoutedFrom);
  const char* chosen = std::getenv("OPENBLAS_CORETYPE");
  if (routed != nullptr && chosen != nullptr) {
    text += std::string(": routed from ") + routed + ", the core OpenBLAS picked, because the " +
            "CPU has the instructions of " + chosen;
  } else if (routed != nullptr) {
    text += std::string(": the core OpenBLAS picked; routing from ") + routed;
  } else if (chosen != nullptr) {
    text += std::string(": chosen by OPENBLAS_CORETYPE=") + chosen;
  }
  return text;
}

}  // namespace dqntrader::gemm
