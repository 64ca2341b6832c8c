#!/usr/bin/env bash
# Creates the benchmark's Python environments from PyPI. Idempotent: it installs only what is missing or
# at the wrong version, so a second run takes a second or two.
#
#   bench/peers/setup.sh            build/bench-venv: numpy + h5py, what every family needs (graph files)
#   bench/peers/setup.sh --peers    also torch + torch_geometric in build/bench-venv (the PyG peers), and
#                                   transformers + safetensors (the Hugging Face GPT-2 round trip)
#   bench/peers/setup.sh --dgl      build/bench-venv-dgl: DGL 2.1.0 with the torch it loads with (below)
#   (--peers and --dgl may be given together)
#
# About torch: PyPI's Linux x86_64 torch wheel is the CUDA build, and it cannot run without its nvidia-*
# wheels: even libtorch_cpu.so links libcudart and libcupti, so `pip install torch --no-deps` fails to
# import (checked with torch 2.15.0: "libcufile.so.0: cannot open shared object file"). The CPU-only
# wheels live on download.pytorch.org, not on PyPI. So this installs the full wheel set, about 5.5 GB
# in the venv (torch 1.2 GB, nvidia-* 3.0 GB, triton 1.0 GB), downloaded once. On CPU torch uses the
# MKL it links statically (torch.__config__.show(): BLAS_INFO=mkl), not Debian's reference BLAS.
#
# About DGL: the newest DGL that pip finds on PyPI for Linux and Python 3.11 is 2.1.0 (PyPI lists 2.2.1
# without such a wheel; later releases are only on DGL's own index, which this machine cannot reach).
# DGL 2.1.0 loads only with torch 2.0 to 2.2.1 (its libgraphbolt is built per torch version), needs
# numpy < 2 (it is compiled against numpy 1.x), pandas and torchdata (0.7.1 is the release that goes with
# torch 2.2.1), and `import dgl` imports graphbolt, which also needs pyyaml ("No module named 'yaml'"
# without it) and pydantic. So it gets its own environment, build/bench-venv-dgl, with torch 2.2.1 from
# PyPI (the CUDA build again: about 5.3 GB), and the script checks that DGL imports and trains a tiny
# graph with each layer the benchmark uses.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV="$ROOT/build/bench-venv"
VENV_DGL="$ROOT/build/bench-venv-dgl"
PYTHON=${PYTHON:-python3}

BASE_PKGS=(numpy==2.4.6 h5py==3.16.0)
PEER_PKGS=(torch==2.15.0 torch_geometric==2.8.1 transformers==5.25.0 safetensors==0.8.0)
DGL_PKGS=(torch==2.2.1 dgl==2.1.0 torchdata==0.7.1 numpy==1.26.4 pandas==2.2.3 pyyaml==6.0.2 pydantic==2.10.6 h5py==3.16.0)

want_peers=0
want_dgl=0
for arg in "$@"; do
  case "$arg" in
    --peers) want_peers=1 ;;
    --dgl) want_dgl=1 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: bench/peers/setup.sh [--peers] [--dgl]" >&2; exit 2 ;;
  esac
done

# Prints the packages of "$@" (name==version) that are missing or at another version in venv $1.
missing() {
  local venv=$1
  shift
  "$venv/bin/python" - "$@" <<'PY'
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

# ensure VENV PACKAGE==VERSION...: creates the venv if needed and installs what is missing.
ensure() {
  local venv=$1
  shift
  if [[ ! -x "$venv/bin/python" ]]; then
    echo "[setup] creating $venv"
    "$PYTHON" -m venv "$venv"
  fi
  local todo
  mapfile -t todo < <(missing "$venv" "$@")
  if (( ${#todo[@]} )); then
    echo "[setup] $(basename "$venv"): pip install ${todo[*]}"
    # All of them in one resolve: a later pin (numpy<2 for DGL) must win over what torch would pull.
    # --no-cache-dir: pip's cache would hold a second copy of the wheels (3.5 GB for torch's), on a disk
    # where CI once ran out of space; a re-run installs only what is missing, so the cache saves nothing.
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir "$@"
    return 0
  fi
  return 1
}

pkgs=("${BASE_PKGS[@]}")
(( want_peers )) && pkgs+=("${PEER_PKGS[@]}")
if ensure "$VENV" "${pkgs[@]}" && (( want_peers )); then
  "$VENV/bin/python" -c 'import torch, torch_geometric' || {
    echo "[setup] torch or torch_geometric does not import in $VENV" >&2
    exit 1
  }
fi

if (( want_dgl )); then
  ensure "$VENV_DGL" "${DGL_PKGS[@]}" || true
  # Every time (2 s): an environment that installs but cannot train is not a peer.
  if ! out=$("$VENV_DGL/bin/python" - 2>&1 <<'PY'
import os
os.environ.setdefault("DGLBACKEND", "pytorch")
import torch, dgl
from dgl.nn import GATConv, HGTConv, HeteroGraphConv, RelGraphConv
g = dgl.graph((torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0])), num_nodes=4)
etype = torch.tensor([0, 0, 1, 1])
x = torch.randn(4, 8, requires_grad=True)
RelGraphConv(8, 4, 2, regularizer=None, self_loop=False)(g, x, etype, presorted=True).sum().backward()
g.ndata["_TYPE"] = torch.zeros(4, dtype=torch.long)
HGTConv(8, 8, 1, 1, 2, dropout=0.0)(g, x, g.ndata["_TYPE"], etype, presorted=True).sum().backward()
hg = dgl.heterograph({("n", "a", "n"): ([0, 1], [1, 2]), ("n", "b", "n"): ([2, 3], [3, 0])})
HeteroGraphConv({r: GATConv(8, 4, 1, allow_zero_in_degree=True) for r in ("a", "b")},
                aggregate="sum")(hg, {"n": x})["n"].sum().backward()
print(f"dgl {dgl.__version__} with torch {torch.__version__}: ok")
PY
  ); then
    echo "$out" | tail -n 20 >&2
    echo "[setup] DGL does not import or run in $VENV_DGL" >&2
    exit 1
  fi
  echo "[setup] $out"
fi
