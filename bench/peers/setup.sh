#!/usr/bin/env bash
# Creates the benchmark's Python environment, build/bench-venv, from PyPI. Idempotent: it installs only
# what is missing or at the wrong version, so a second run takes a second.
#
#   bench/peers/setup.sh            numpy + h5py: what every family needs (graph files, cost model)
#   bench/peers/setup.sh --peers    also torch + torch_geometric, for the peers-* families
#
# About torch: PyPI's Linux x86_64 torch wheel is the CUDA build, and it cannot run without its nvidia-*
# wheels: even libtorch_cpu.so links libcudart and libcupti, so `pip install torch --no-deps` fails to
# import (checked with torch 2.15.0: "libcufile.so.0: cannot open shared object file"). The CPU-only
# wheels live on download.pytorch.org, not on PyPI. So this installs the full wheel set, about 5.5 GB
# in the venv (torch 1.2 GB, nvidia-* 3.0 GB, triton 1.0 GB), downloaded once. On CPU torch uses the
# MKL it links statically (torch.__config__.show(): BLAS_INFO=mkl), not Debian's reference BLAS.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV="$ROOT/build/bench-venv"
PYTHON=${PYTHON:-python3}

BASE_PKGS=(numpy==2.4.6 h5py==3.16.0)
PEER_PKGS=(torch==2.15.0 torch_geometric==2.8.1)

want_peers=0
case "${1:-}" in
  --peers) want_peers=1 ;;
  "") ;;
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: bench/peers/setup.sh [--peers]" >&2; exit 2 ;;
esac

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "[setup] creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi

# Prints the packages of "$@" (name==version) that are missing or at another version.
missing() {
  "$VENV/bin/python" - "$@" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have is None or have.split("+")[0] != want:
        print(spec)
PY
}

pkgs=("${BASE_PKGS[@]}")
(( want_peers )) && pkgs+=("${PEER_PKGS[@]}")
mapfile -t todo < <(missing "${pkgs[@]}")
if (( ${#todo[@]} )); then
  echo "[setup] pip install ${todo[*]}"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${todo[@]}"
  if (( want_peers )); then
    "$VENV/bin/python" -c 'import torch, torch_geometric' || {
      echo "[setup] torch or torch_geometric does not import in $VENV" >&2
      exit 1
    }
  fi
fi
