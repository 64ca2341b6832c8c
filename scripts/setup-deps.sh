#!/usr/bin/env bash
# Installs the Debian packages Tessel needs (DESIGN.md "Dependencies") that are missing. Idempotent:
# when everything is present it changes nothing and needs no network.
set -euo pipefail

packages=(
  cmake g++ make pkg-config ccache
  clang libclang-rt-dev                        # the libFuzzer targets (tests/fuzz)
  clang-format                                 # the format check (scripts/check-format.sh)
  iproute2 util-linux                          # ip, unshare: the 3-host tests (tests/cluster/netns)
  strace                                       # the names a run creates (tests/integration/planted_links.sh)
  xz-utils bzip2                               # compressed inputs (tests/unit/storage line_reader, edges_import)
  libopenmpi-dev openmpi-bin
  libhdf5-dev
  libcli11-dev
  prometheus-cpp-dev                           # metric families and the text format (monitoring/)
  libgtest-dev libgmock-dev
  libmetis-dev
  libptscotch-dev                              # the distributed partitioner (its int64 build)
  libtomlplusplus-dev
  libopenblas-dev
  zlib1g-dev
  nlohmann-json3-dev
  libarchive-dev
  libbenchmark-dev
  prometheus
  python3
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup-deps: note: no CUDA toolkit found; the build drops the CUDA kernels"
fi
