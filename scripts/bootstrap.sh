#!/usr/bin/env bash
# Sets up everything dqntrader needs on a Debian 12 machine, from nothing:
#   1. the Debian packages the build and the tests use, with --browser Chromium for the
#      report test, with --bench the benchmark peers, with --mpi OpenMPI (sweeps across
#      ranks, DQNTRADER_ENABLE_MPI), with --onnx ONNX and protobuf (DQNTRADER_ENABLE_ONNX),
#      ONNX's Python checker, OpenCV's Python module and, from the npm registry,
#      onnxruntime-node (the two independent runtimes the tests run exported models in) into
#      DIR/node/node_modules;
#   2. Kokkos (and, for the OpenMP build, Kokkos Kernels): 3.4.01 from Debian's trilinos
#      13.2.0 source package by default, or 4.6.01 from the upstream release tarballs in a
#      local folder (--kokkos 4.6.01), patched (scripts/patches/kokkos-<version>-*.patch) and
#      installed into a cache prefix keyed by version, options and patch contents. A prefix
#      that exists is reused, so a second run costs seconds.
# Prints nothing on stdout but, with --print-prefix, the Kokkos prefix to configure with.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/bootstrap.sh [options]

  --cuda             build Kokkos with the CUDA backend (plus OpenMP and Serial on the host)
                     instead of the host-only OpenMP build; Kokkos Kernels is not needed there
  --arch ARCH        CUDA architecture for --cuda (Kokkos name, default HOPPER90 = sm_90)
  --kokkos VERSION   3.4.01 (default: Debian's trilinos source package) or 4.6.01 (the
                     upstream release tarballs in --tarballs, checked against their SHA256)
  --tarballs DIR     where kokkos-4.6.01.tar.gz and kokkos-kernels-4.6.01.tar.gz are
                     (default: the shared/deps folder beside the checkout)
  --deps-dir DIR     cache root (default $DQNTRADER_DEPS_DIR, else ~/.cache/dqntrader)
  --no-apt           do not install Debian packages (check only that the tools exist)
  --bench            also install the benchmark peers (python3-torch, python3-numpy)
  --browser          also install Chromium (the suite renders a run report in it)
  --mpi              also install OpenMPI (libopenmpi-dev, openmpi-bin) for DQNTRADER_ENABLE_MPI
  --onnx             also install ONNX and protobuf (libonnx-dev, libprotobuf-dev) for
                     DQNTRADER_ENABLE_ONNX, python3-onnx, python3-opencv (OpenCV's DNN runs
                     the exported models in the tests), Node.js when missing, and
                     onnxruntime-node (npm, its install script skipped: the CPU runtime ships
                     in the package) into DIR/node/node_modules
  --python          also install what the Python module (DQNTRADER_ENABLE_PYTHON) builds and
                     is tested with: pybind11-dev, python3-dev, python3-venv, python3-pandas,
                     python3-pytest
  --jobs N           parallel build jobs (default 2)
  --print-prefix     print the installed prefix (for CMAKE_PREFIX_PATH) on stdout at the end
  -h, --help         this text

The cache holds:
  DIR/src/         the unpacked, unpatched kokkos and kokkos-kernels sources of each version
  DIR/install/KEY  one installed prefix per configuration (Kokkos and Kokkos Kernels)
EOF
}

backend=openmp
arch=HOPPER90
kokkos_version=3.4.01
tarballs=
deps_dir=${DQNTRADER_DEPS_DIR:-${HOME}/.cache/dqntrader}
use_apt=1
bench=0
browser=0
mpi=0
onnx=0
python=0
jobs=2
print_prefix=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) backend=cuda ;;
    --arch) arch=$2; shift ;;
    --kokkos) kokkos_version=$2; shift ;;
    --tarballs) tarballs=$2; shift ;;
    --deps-dir) deps_dir=$2; shift ;;
    --no-apt) use_apt=0 ;;
    --bench) bench=1 ;;
    --browser) browser=1 ;;
    --mpi) mpi=1 ;;
    --onnx) onnx=1 ;;
    --python) python=1 ;;
    --jobs) jobs=$2; shift ;;
    --print-prefix) print_prefix=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bootstrap: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { echo "bootstrap: $*" >&2; }
die() { echo "bootstrap: error: $*" >&2; exit 1; }

trilinos_version=13.2.0
trilinos_sha256=0ddb47784ba7b8a6b9a07a4822b33be508feb4ccd54301b2a5d10c9e54524b90
# The upstream 4.6.01 release tarballs (shared/deps/SHA256SUMS lists the same sums).
kokkos_460_sha256=b9d70e4653b87a06dbb48d63291bf248058c7c7db4bd91979676ad5609bb1a3a
kernels_460_sha256=95b9357f37ab3b9c3913c00741acb2501831c28ea8664de67818ae79c69c5908
case "$kokkos_version" in
  3.4.01 | 4.6.01) ;;
  *) die "--kokkos takes 3.4.01 or 4.6.01, not '$kokkos_version'" ;;
esac
[ -n "$tarballs" ] || tarballs=$(cd "$here/../.." && pwd)/shared/deps

# ---------------------------------------------------------------------------------------
# 1. Debian packages
# ---------------------------------------------------------------------------------------
# OpenBLAS built for OpenMP: it runs on the OpenMP threads Kokkos already has, where the
# pthreads build would compete with them for the cores.
# libxxhash-dev: the files' checksum (XXH64). python3-numpy, python3-xxhash: the tests'
# float64 oracles (tests/oracles/).
packages=(cmake ninja-build g++ make patch pkg-config libgtest-dev libbenchmark-dev
          libopenblas-openmp-dev libcli11-dev nlohmann-json3-dev libxxhash-dev dpkg-dev python3
          python3-numpy python3-xxhash)
[ "$bench" = 1 ] && packages+=(python3-torch)
[ "$browser" = 1 ] && packages+=(chromium)
[ "$mpi" = 1 ] && packages+=(libopenmpi-dev openmpi-bin)
[ "$python" = 1 ] && packages+=(pybind11-dev python3-dev python3-venv python3-pandas python3-pytest)
if [ "$onnx" = 1 ]; then
  packages+=(libonnx-dev libprotobuf-dev python3-onnx python3-opencv)
  command -v npm >/dev/null || packages+=(nodejs npm)
fi

missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

if [ "$use_apt" = 1 ]; then
  mapfile -t missing < <(missing_packages "${packages[@]}")
  if [ ${#missing[@]} -gt 0 ]; then
    sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
    log "installing Debian packages: ${missing[*]}"
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
else
  for tool in cmake ninja g++; do
    command -v "$tool" >/dev/null || die "--no-apt given but '$tool' is not installed"
  done
fi

# ---------------------------------------------------------------------------------------
# 2. Kokkos and Kokkos Kernels sources from Debian's trilinos source package
# ---------------------------------------------------------------------------------------
src_dir=$deps_dir/src
kokkos_src=$src_dir/kokkos-$kokkos_version
kernels_src=$src_dir/kokkos-kernels-$kokkos_version

# Writes a deb-src entry for bookworm for every bookworm 'deb' entry the machine already
# has, with the same URIs, so no archive address is written anywhere but on this machine.
derive_deb_src() {
  local out=$1 f
  : >"$out"
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
         {
           uris = ""; suites = ""; comps = ""; signed = ""; types = ""
           for (i = 1; i <= NF; i++) {
             line = $i
             if (line ~ /^[ \t]*#/) continue
             key = line; sub(/:.*/, "", key)
             val = line; sub(/^[^:]*:[ \t]*/, "", val)
             if (key == "Types") types = val
             if (key == "URIs") uris = val
             if (key == "Suites") suites = val
             if (key == "Components") comps = val
             if (key == "Signed-By") signed = val
           }
           if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ / bookworm /) {
             printf "deb-src [%s] %s bookworm %s\n", (signed != "" ? "signed-by=" signed : "trusted=no"), uris, comps
           }
         }' "$f" >>"$out"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" {
           opts = ""; i = 2
           if ($2 ~ /^\[/) { while ($i !~ /\]$/) { opts = opts $i " "; i++ } opts = opts $i " "; i++ }
           uri = $i; suite = $(i + 1)
           if (suite != "bookworm") next
           comps = ""; for (j = i + 2; j <= NF; j++) comps = comps " " $j
           printf "deb-src %s%s bookworm%s\n", opts, uri, comps
         }' "$f" >>"$out"
  done
  sed -i 's/\[trusted=no\] //' "$out"
  [ -s "$out" ] || die "no bookworm 'deb' entry found in the apt configuration to derive a deb-src entry from"
}

fetch_sources() {
  local work=$deps_dir/apt
  rm -rf "$work"
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/download"
  derive_deb_src "$work/sources.list"
  local apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none"
                  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
                  -o "APT::Sandbox::User=root" -o "Debug::NoLocking=1")
  log "fetching the trilinos $trilinos_version source package (about 166 MB)"
  apt-get "${apt_opts[@]}" update -qq >&2
  (cd "$work/download" && apt-get "${apt_opts[@]}" source --download-only -qq trilinos >&2)
  local orig=$work/download/trilinos_$trilinos_version.orig.tar.gz
  [ -f "$orig" ] || die "apt-get source did not produce $orig"
  local sum
  sum=$(sha256sum "$orig" | cut -d' ' -f1)
  [ "$sum" = "$trilinos_sha256" ] || die "SHA256 of $orig is $sum, expected $trilinos_sha256"
  log "unpacking packages/kokkos and packages/kokkos-kernels"
  local top=Trilinos-trilinos-release-${trilinos_version//./-}
  local stage=$work/unpack
  mkdir -p "$stage"
  tar -xzf "$orig" -C "$stage" "$top/packages/kokkos" "$top/packages/kokkos-kernels"
  mkdir -p "$src_dir"
  rm -rf "$kokkos_src" "$kernels_src"
  mv "$stage/$top/packages/kokkos" "$kokkos_src"
  mv "$stage/$top/packages/kokkos-kernels" "$kernels_src"
  rm -rf "$work"
}

# Unpacks one upstream release tarball of tarballs/ into src/, after checking its SHA256.
unpack_release() {
  local name=$1 expected=$2 file=$tarballs/$1.tar.gz sum
  [ -f "$file" ] || die "$file not found: --kokkos $kokkos_version builds from the upstream release tarballs (--tarballs DIR)"
  sum=$(sha256sum "$file" | cut -d' ' -f1)
  [ "$sum" = "$expected" ] || die "SHA256 of $file is $sum, expected $expected"
  log "unpacking $file"
  mkdir -p "$src_dir"
  rm -rf "${src_dir:?}/$name"
  tar -xzf "$file" -C "$src_dir"
  [ -f "$src_dir/$name/CMakeLists.txt" ] || die "$file did not unpack into $name/"
}

# The CUDA build needs Kokkos only (see the Kokkos Kernels step below).
need_kernels=0
[ "$backend" = openmp ] && need_kernels=1
if [ "$kokkos_version" = 3.4.01 ]; then
  if [ ! -f "$kokkos_src/CMakeLists.txt" ] ||
    { [ "$need_kernels" = 1 ] && [ ! -f "$kernels_src/CMakeLists.txt" ]; }; then
    fetch_sources
  fi
  grep -q "3.4.01" "$kokkos_src/master_history.txt" || die "$kokkos_src is not Kokkos $kokkos_version"
else
  [ -f "$kokkos_src/CMakeLists.txt" ] || unpack_release "kokkos-$kokkos_version" "$kokkos_460_sha256"
  if [ "$need_kernels" = 1 ] && [ ! -f "$kernels_src/CMakeLists.txt" ]; then
    unpack_release "kokkos-kernels-$kokkos_version" "$kernels_460_sha256"
  fi
fi

# ---------------------------------------------------------------------------------------
# 3. Build and install into a prefix keyed by version, options and patches
# ---------------------------------------------------------------------------------------
patches=("$here"/patches/kokkos-"$kokkos_version"-*.patch)
[ -f "${patches[0]}" ] || patches=()
patch_hash=$(cat "${patches[@]}" /dev/null | sha256sum | cut -c1-12)
# Position-independent code: the Python module links Kokkos into a shared object.
kokkos_opts=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_SERIAL=ON
             -DKokkos_ENABLE_OPENMP=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON)
if [ "$kokkos_version" != 3.4.01 ]; then
  # What Kokkos 4 deprecated is gone in 5: build without it, so that a use of it fails here.
  kokkos_opts+=(-DKokkos_ENABLE_DEPRECATED_CODE_4=OFF -DKokkos_ENABLE_DEPRECATION_WARNINGS=ON)
fi
if [ "$backend" = cuda ]; then
  kokkos_opts+=(-DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_$arch=ON")
  # Device lambdas: an option up to 3.x, always on (and the option deprecated) in 4.x.
  [ "$kokkos_version" = 3.4.01 ] && kokkos_opts+=(-DKokkos_ENABLE_CUDA_LAMBDA=ON)
  key=kokkos-$kokkos_version-cuda-$arch-pic-$patch_hash
else
  key=kokkos-$kokkos_version-openmp-pic-$patch_hash
fi
prefix=$deps_dir/install/$key
build_root=$deps_dir/build/$key

if [ -f "$prefix/.complete" ]; then
  log "reusing $prefix"
else
  rm -rf "$build_root" "$prefix"
  mkdir -p "$build_root"
  log "patching Kokkos $kokkos_version"
  cp -r "$kokkos_src" "$build_root/kokkos"
  for p in "${patches[@]}"; do
    if command -v patch >/dev/null; then
      patch -s -p1 -d "$build_root/kokkos" <"$p" || die "patch $(basename "$p") does not apply"
    else
      # Without patch(1): make the tree its own repository so git applies paths relative to it.
      [ -d "$build_root/kokkos/.git" ] || git -C "$build_root/kokkos" init -q
      git -C "$build_root/kokkos" apply "$p" || die "patch $(basename "$p") does not apply"
    fi
  done
  compiler=(-DCMAKE_CXX_COMPILER=g++)
  if [ "$backend" = cuda ]; then
    command -v nvcc >/dev/null || die "--cuda needs nvcc on PATH"
    compiler=(-DCMAKE_CXX_COMPILER="$build_root/kokkos/bin/nvcc_wrapper")
  fi
  log "building Kokkos $kokkos_version ($backend) into $prefix"
  start=$SECONDS
  cmake -S "$build_root/kokkos" -B "$build_root/kokkos-build" -G Ninja "${compiler[@]}" \
    "${kokkos_opts[@]}" -DCMAKE_INSTALL_PREFIX="$prefix" >"$build_root/kokkos-configure.log" 2>&1 ||
    { tail -n 40 "$build_root/kokkos-configure.log" >&2; die "configuring Kokkos failed"; }
  cmake --build "$build_root/kokkos-build" -j "$jobs" >"$build_root/kokkos-build.log" 2>&1 ||
    { tail -n 40 "$build_root/kokkos-build.log" >&2; die "building Kokkos failed"; }
  cmake --install "$build_root/kokkos-build" >/dev/null
  log "Kokkos built in $((SECONDS - start)) s"

  if [ "$backend" = openmp ]; then
    # The project calls KokkosBlas::gemm on float LayoutRight host views only, and that
    # call goes to OpenBLAS through the BLAS TPL specialisation, which is instantiated in
    # the caller. So no explicit instantiation is built at all.
    log "building Kokkos Kernels $kokkos_version (BLAS TPL, no explicit instantiations)"
    kernels_opts=()
    # 4.x builds its parts as components: the BLAS one is all the project uses.
    [ "$kokkos_version" = 3.4.01 ] ||
      kernels_opts=(-DKokkosKernels_ENABLE_ALL_COMPONENTS=OFF -DKokkosKernels_ENABLE_COMPONENT_BLAS=ON)
    start=$SECONDS
    cmake -S "$kernels_src" -B "$build_root/kernels-build" -G Ninja -DCMAKE_CXX_COMPILER=g++ \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DKokkos_ROOT="$prefix" \
      -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
      -DCMAKE_INSTALL_PREFIX="$prefix" -DKokkosKernels_ENABLE_TPL_BLAS=ON \
      -DKokkosKernels_INST_DOUBLE=OFF -DKokkosKernels_INST_FLOAT=OFF \
      -DKokkosKernels_INST_COMPLEX_DOUBLE=OFF -DKokkosKernels_INST_COMPLEX_FLOAT=OFF \
      -DKokkosKernels_INST_ORDINAL_INT=OFF -DKokkosKernels_INST_ORDINAL_INT64_T=OFF \
      -DKokkosKernels_INST_OFFSET_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=OFF \
      -DKokkosKernels_INST_LAYOUTLEFT=OFF -DKokkosKernels_INST_LAYOUTRIGHT=OFF \
      -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF -DKokkosKernels_INST_EXECSPACE_OPENMP=OFF \
      -DKokkosKernels_ENABLE_TESTS=OFF -DKokkosKernels_ENABLE_EXAMPLES=OFF "${kernels_opts[@]}" \
      >"$build_root/kernels-configure.log" 2>&1 ||
      { tail -n 40 "$build_root/kernels-configure.log" >&2; die "configuring Kokkos Kernels failed"; }
    cmake --build "$build_root/kernels-build" -j "$jobs" >"$build_root/kernels-build.log" 2>&1 ||
      { tail -n 40 "$build_root/kernels-build.log" >&2; die "building Kokkos Kernels failed"; }
    cmake --install "$build_root/kernels-build" >/dev/null
    log "Kokkos Kernels built in $((SECONDS - start)) s"
  fi
  printf 'kokkos %s\nbackend %s\narch %s\npatches %s\n' "$kokkos_version" "$backend" \
    "$([ "$backend" = cuda ] && echo "$arch" || echo host)" "$patch_hash" >"$prefix/.complete"
  rm -rf "$build_root"
fi

# ---------------------------------------------------------------------------------------
# 4. onnxruntime-node, the runtime the tests execute exported ONNX models in
# ---------------------------------------------------------------------------------------
# Pinned; --ignore-scripts: its install script would fetch CUDA libraries from outside the npm
# registry, and the CPU runtime is in the package itself.
onnxruntime_node=1.31.1
if [ "$onnx" = 1 ]; then
  node_dir=$deps_dir/node
  if [ "$(cat "$node_dir/.complete" 2>/dev/null)" != "onnxruntime-node $onnxruntime_node" ]; then
    log "installing onnxruntime-node $onnxruntime_node into $node_dir (npm)"
    rm -rf "$node_dir"
    mkdir -p "$node_dir"
    (cd "$node_dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
      "onnxruntime-node@$onnxruntime_node" >&2) || die "installing onnxruntime-node failed"
    echo "onnxruntime-node $onnxruntime_node" >"$node_dir/.complete"
  else
    log "reusing onnxruntime-node $onnxruntime_node in $node_dir"
  fi
fi

[ "$print_prefix" = 1 ] && echo "$prefix"
exit 0
