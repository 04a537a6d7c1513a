# dqntrader's Spack recipe. The project publishes no release tarball and no repository address,
# so Spack builds it only from a local checkout named with `spack develop` (spack/README.md).
# For the same reason the recipe has no homepage, and it names no maintainers: the project has
# no public address or account names to give.
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Dqntrader(CMakePackage, CudaPackage):
    """Deep Q-Network trading agents on Kokkos: synthetic and CSV market data, training with
    validation every epoch, and backtests of trained or built-in policies. A build has one
    backend: CUDA (matrix products through cuBLASLt on one GPU) or OpenMP (Kokkos Kernels and a
    BLAS on the host's threads)."""

    # LICENSE (the Apache License 2.0) and NOTICE at the root of the checkout.
    license("Apache-2.0")

    # The only version is the checkout that `spack develop --path` points at; there is nothing
    # to fetch, so a spec that is not a develop spec fails at the fetch step.
    version("main")

    # +cuda comes from CudaPackage, with its cuda_arch variant (exactly one value: see below).
    variant(
        "openmp",
        default=True,
        description="Matrix products through Kokkos Kernels and a BLAS on Kokkos' OpenMP "
        "execution space",
    )
    variant(
        "mpi",
        default=False,
        description="Sweeps across ranks under mpirun or srun (dqntrader sweep), one rank per GPU",
    )
    variant(
        "onnx",
        default=False,
        description="dqntrader export --onnx: a policy's whole decision as an ONNX model",
    )
    variant(
        "python",
        default=False,
        description="The Python module (import dqntrader), installed into the spec's "
        "site-packages",
    )
    variant("tests", default=False, description="Build the GoogleTest suite")
    variant(
        "benchmarks",
        default=False,
        description="Build the Google Benchmark programs (in the build tree; not installed)",
    )

    # CMakeLists.txt stops at configure time unless exactly one backend is on.
    conflicts(
        "+cuda", when="+openmp", msg="+cuda and +openmp are exclusive: a build has one backend"
    )
    conflicts("~cuda", when="~openmp", msg="enable one backend: +cuda or +openmp")
    conflicts("+cuda", when="cuda_arch=none", msg="+cuda needs one cuda_arch, e.g. cuda_arch=90")

    depends_on("cxx", type="build")
    depends_on("c", type="build")  # tests/tools/failing_io.c, with +tests or --test=root
    depends_on("cmake@3.21:", type="build")  # cmake_minimum_required, CMakePresets.json v3

    # The Kokkos versions the project's CI and GPU runs build and test: 3.4.01 (the
    # bootstrap's) and 4.6.01 (C++17 and C++20). Kokkos 5 is left out until one has been built
    # and tested (tests/spack/check_recipe.py keeps this range and the CI's versions together).
    depends_on("kokkos@3.4.01:4")
    depends_on("cli11@2:")  # CLI::App::set_version_flag
    depends_on("nlohmann-json@3.10:")
    # XXH64, the files' checksum: its header alone (the implementation is compiled in).
    depends_on("xxhash", type="build")
    depends_on("googletest", when="+tests")
    depends_on("googletest", type="test")  # spack install --test=root builds and runs the suite
    depends_on("benchmark", when="+benchmarks")
    depends_on("mpi", when="+mpi")
    # ONNX's C++ library writes and checks the model; its CMake package needs protobuf's.
    depends_on("onnx@1.12:", when="+onnx")
    depends_on("protobuf", when="+onnx")
    # The module: pybind11 2.10's py::module_ and gil_scoped_*; NumPy at run time.
    with when("+python"):
        extends("python")
        depends_on("python@3.9:", type=("build", "link", "run"))
        depends_on("py-pybind11@2.10:", type="build")
        depends_on("py-numpy", type="run")

    with when("+openmp"):
        # OpenMP must be Kokkos' default execution space, which it is not next to CUDA.
        depends_on("kokkos+openmp~cuda")
        # Kokkos Kernels pins Kokkos to its own version; KokkosBlas::gemm goes to the BLAS.
        depends_on("kokkos-kernels+openmp+blas")
        depends_on("blas")
        # OpenBLAS on the threads Kokkos already has (docs/BENCHMARKS.md: the pthreads build
        # competes with them for the cores).
        depends_on("openblas threads=openmp", when="^[virtuals=blas] openblas")

    with when("+cuda"):
        # Kokkos Kernels is not used: every product goes through the backend's cuBLASLt handle.
        # cudaGraphInstantiate's CUDA 12 form (flags, no error node) and cuBLASLt's TF32 and bf16
        # compute types.
        depends_on("cuda@12:")
        depends_on("kokkos+cuda+wrapper")
        # Device lambdas (KOKKOS_LAMBDA): a variant of Spack's Kokkos up to 4.x, off by
        # default; always on in Kokkos 5.
        depends_on("kokkos+cuda_lambda", when="^kokkos@:4")

    # Kokkos builds for one GPU architecture: hand it ours (a second cuda_arch value has no
    # Kokkos to match and fails to concretize).
    for _cuda_arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos+cuda cuda_arch={_cuda_arch}", when=f"+cuda cuda_arch={_cuda_arch}")

    # Kokkos supports CUDA 13 from 4.7.01 on.
    conflicts("^cuda@13:", when="+cuda ^kokkos@:4.7.00", msg="CUDA 13 needs Kokkos 4.7.01 or newer")

    sanity_check_is_file = [join_path("bin", "dqntrader")]

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("DQNTRADER_ENABLE_CUDA", "cuda"),
            self.define_from_variant("DQNTRADER_ENABLE_OPENMP", "openmp"),
            self.define_from_variant("DQNTRADER_ENABLE_TESTS", "tests"),
            self.define_from_variant("DQNTRADER_ENABLE_BENCHMARKS", "benchmarks"),
            self.define_from_variant("DQNTRADER_ENABLE_MPI", "mpi"),
            self.define_from_variant("DQNTRADER_ENABLE_ONNX", "onnx"),
            self.define_from_variant("DQNTRADER_ENABLE_PYTHON", "python"),
        ]
        if spec.satisfies("+python"):
            # The module goes where this Python looks for packages.
            args.append(self.define("Python_EXECUTABLE", spec["python"].command.path))
            args.append(self.define("DQNTRADER_PYTHON_INSTALL_DIR", python_platlib))
        if spec.satisfies("+cuda"):
            # Kokkos' CUDA build compiles through its nvcc_wrapper.
            args.append(self.define("CMAKE_CXX_COMPILER", spec["kokkos"].package.kokkos_cxx))
        if spec.satisfies("+openmp"):
            # The BLAS of this spec, not the first one FindBLAS meets on the system.
            args.append(self.define("BLAS_LIBRARIES", spec["blas"].libs.joined(";")))
        if self.run_tests:
            # spack install --test=root: the suite is built (whatever +tests says) and the
            # check phase runs it; the last definition of a variable is the one CMake keeps.
            args.append(self.define("DQNTRADER_ENABLE_TESTS", True))
        return args

    # Stand-alone tests (`spack test run dqntrader`). With +cuda, test_synth_and_backtest needs
    # a visible GPU; test_version does not start Kokkos.
    def _dqntrader(self):
        return which(self.prefix.bin.dqntrader, required=True)

    def test_version(self):
        """dqntrader --version names the project and this spec's backend"""
        out = self._dqntrader()("--version", output=str.split, error=str.split)
        backend = "cuda" if self.spec.satisfies("+cuda") else "openmp"
        assert out.startswith("dqntrader "), out
        assert f", backend {backend})" in out, out

    def test_synth_and_backtest(self):
        """a 64-bar synthetic market, then a buy-and-hold backtest of it"""
        dqntrader = self._dqntrader()
        dqntrader("synth", "--bars", "64", "--out", "smoke.csv")
        out = dqntrader(
            "backtest",
            "--data",
            "smoke.csv",
            "--policy",
            "buy-and-hold",
            output=str.split,
            error=str.split,
        )
        assert "built-in buy-and-hold" in out, out
        assert "bars 0 .. 63" in out, out
