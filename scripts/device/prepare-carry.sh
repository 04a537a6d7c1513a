#!/usr/bin/env bash
# Run here, before a device call: fills .carry/ (git-ignored) with what the GPU machine,
# which reaches no network, needs to build the CUDA variant:
#   .carry/deps/src/kokkos-3.4.01   the unpacked Kokkos sources (bootstrap.sh patches them there)
#   .carry/deps/tarballs/           the Kokkos 4.6.01 release tarball, when shared/deps beside the
#                                   checkout has it (cuda-suite.sh --kokkos 4.6.01)
#   .carry/debroot/                 Debian's GoogleTest, Google Benchmark, CLI11, nlohmann-json,
#                                   xxHash, ONNX and protobuf, unpacked (headers, static and
#                                   shared libs): the export is built there too
# Pass the call carry: [".carry"].
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${DQNTRADER_DEPS_DIR:-${HOME}/.cache/dqntrader}
carry=$root/.carry
[ -d "$cache/src/kokkos-3.4.01" ] || "$root/scripts/bootstrap.sh" >/dev/null
rm -rf "$carry"
mkdir -p "$carry/deps/src" "$carry/debroot" "$carry/debs"
cp -r "$cache/src/kokkos-3.4.01" "$carry/deps/src/"
tarballs=$(cd "$root/.." && pwd)/shared/deps
if [ -f "$tarballs/kokkos-4.6.01.tar.gz" ]; then
  mkdir -p "$carry/deps/tarballs"
  cp "$tarballs/kokkos-4.6.01.tar.gz" "$carry/deps/tarballs/"
fi
(cd "$carry/debs" && apt-get download -qq libgtest-dev libgmock-dev libbenchmark-dev \
  libbenchmark1debian libcli11-dev nlohmann-json3-dev libxxhash-dev \
  libonnx-dev libonnx1 libonnxifi libprotobuf-dev libprotobuf32 libprotobuf-lite32)
for deb in "$carry"/debs/*.deb; do dpkg -x "$deb" "$carry/debroot"; done
rm -rf "$carry/debs" "$carry/debroot/usr/share/doc"
du -sh "$carry"
