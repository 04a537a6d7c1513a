// Every spelling that differs between the Kokkos releases dqntrader builds against:
// 3.4.01 from the project's bootstrap, and the 4.x/5.x releases Spack installs.
// Nothing else in the project's sources tests KOKKOS_VERSION; the build's side (the
// command-line argument for the host threads) is cmake/kokkos_compat.cmake.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstring>
#include <string>
#include <type_traits>

namespace dqntrader::compat {

// Mathematical functions moved from Kokkos::Experimental to Kokkos in 3.7.
#if KOKKOS_VERSION >= 30700
namespace kmath = ::Kokkos;
#else
namespace kmath = ::Kokkos::Experimental;
#endif

// Reducers' and scans' join() took volatile arguments before 3.7; 4.x rejects them.
#if KOKKOS_VERSION >= 30700
#define DQNTRADER_JOIN_VOLATILE
#else
#define DQNTRADER_JOIN_VOLATILE volatile
#endif

// Execution-space fences took a label from 3.6 on.
template <class ExecSpace>
void fence(const ExecSpace& space, const std::string& why) {
#if KOKKOS_VERSION >= 30600
  space.fence(why);
#else
  (void)why;
  space.fence();
#endif
}

// A trivially copyable reinterpretation of the bits of one type as another, usable in
// kernels (Kokkos::bit_cast exists only from 4.0 on).
template <class To, class From>
KOKKOS_INLINE_FUNCTION To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
  static_assert(std::is_trivially_copyable<From>::value && std::is_trivially_copyable<To>::value,
                "bit_cast needs trivially copyable types");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

// The result of an array reduction (a functor with a runtime value_count) in host memory.
// Up to 3.x a raw pointer served; 4.0 removed that overload, and an unmanaged host View is the
// spelling every version accepts.
using HostArrayResult = Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
inline HostArrayResult host_array_result(double* values, std::size_t count) {
  return HostArrayResult(values, count);
}

/// The version of the Kokkos compiled against as Kokkos prints it (print_configuration's
/// "Kokkos Version"): major.minor.patch without padding, 3.4.1 for 3.4.01 and 5.1.1 for 5.1.1.
inline std::string kokkos_version_string() {
  return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) +
         "." + std::to_string(KOKKOS_VERSION % 100);
}

/// Quiet NaN and infinity usable in kernels (std::numeric_limits is host-only under nvcc
/// without relaxed constexpr).
KOKKOS_INLINE_FUNCTION double quiet_nan() {
  return bit_cast<double>(0x7ff8000000000000ull);
}
KOKKOS_INLINE_FUNCTION double infinity() {
  return bit_cast<double>(0x7ff0000000000000ull);
}
KOKKOS_INLINE_FUNCTION bool is_nan(double x) {
  return x != x;
}
constexpr double max_double = 1.7976931348623157e308;

// Initialization settings: InitArguments up to 3.x, InitializationSettings from 3.7 on
// (InitArguments was removed in 4.0).
struct InitOptions {
  int num_threads = -1;           // host threads, -1 = Kokkos's default
  int device_id = -1;             // accelerator ordinal, -1 = Kokkos's default
  bool disable_warnings = false;  // Kokkos's advice on OMP_PROC_BIND and the like
};

inline void initialize(const InitOptions& options) {
#if KOKKOS_VERSION >= 30700
  Kokkos::InitializationSettings settings;
  if (options.num_threads > 0)
    settings.set_num_threads(options.num_threads);
  if (options.device_id >= 0)
    settings.set_device_id(options.device_id);
  settings.set_disable_warnings(options.disable_warnings);
  Kokkos::initialize(settings);
#else
  Kokkos::InitArguments arguments;
  arguments.num_threads = options.num_threads;
  arguments.device_id = options.device_id;
  arguments.disable_warnings = options.disable_warnings;
  Kokkos::initialize(arguments);
#endif
}

}  // namespace dqntrader::compat

// KokkosBlas::gemm took an execution space as first argument from Kokkos Kernels 4.x on.
// Only the OpenMP backend calls it; it defines DQNTRADER_COMPAT_KOKKOS_BLAS before
// including this header, so that no other file pulls Kokkos Kernels in.
#if defined(DQNTRADER_COMPAT_KOKKOS_BLAS) && !defined(DQNTRADER_COMPAT_KOKKOS_BLAS_DONE)
#define DQNTRADER_COMPAT_KOKKOS_BLAS_DONE
#include <KokkosBlas3_gemm.hpp>

namespace dqntrader::compat {

namespace detail {
template <class Space, class A, class B, class C, class = void>
struct GemmTakesSpace : std::false_type {};

template <class Space, class A, class B, class C>
struct GemmTakesSpace<
    Space, A, B, C,
    std::void_t<decltype(KokkosBlas::gemm(
        std::declval<const Space&>(), "N", "N", std::declval<typename A::const_value_type&>(),
        std::declval<const A&>(), std::declval<const B&>(),
        std::declval<typename C::const_value_type&>(), std::declval<const C&>()))>>
    : std::true_type {};
}  // namespace detail

/// KokkosBlas::gemm on space where the installed Kokkos Kernels accepts one, else on the
/// default instance of the same execution space.
template <class Space, class A, class B, class C>
void blas_gemm(const Space& space, const char* trans_a, const char* trans_b,
               typename A::const_value_type alpha, const A& a, const B& b,
               typename C::const_value_type beta, const C& c) {
  if constexpr (detail::GemmTakesSpace<Space, A, B, C>::value) {
    KokkosBlas::gemm(space, trans_a, trans_b, alpha, a, b, beta, c);
  } else {
    (void)space;
    KokkosBlas::gemm(trans_a, trans_b, alpha, a, b, beta, c);
  }
}

}  // namespace dqntrader::compat
#endif
