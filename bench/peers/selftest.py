"""Checks the peer side without Tessel: writes small graph files (one-hot, with features, and with three node
types), trains every peer variant of every model on them for a few epochs, and checks that
- every variant runs (status ok, finite losses), in build/bench-venv (PyG and the compact reference) and,
  where it exists, in build/bench-venv-dgl (DGL);
- all RGCN variants report the same losses (same model, same initial weights), DGL's RelGraphConv included;
- add_features.py leaves a readable file, with and without --keep-labels.

  build/bench-venv/bin/python bench/peers/selftest.py      (needs bench/peers/setup.sh --peers; DGL's
                                                              runs need bench/peers/setup.sh --dgl)

Exit 0 when every check passes, 1 otherwise. Takes one to three minutes (most of it importing torch).
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import graphfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON = {"pyg": sys.executable, "torch": sys.executable,
          "dgl": os.path.join(ROOT, "build", "bench-venv-dgl", "bin", "python")}
# (system, model, variant) as rgnn_peer.py takes them.
VARIANTS = [("pyg", "rgcn", "RGCNConv"), ("pyg", "rgcn", "FastRGCNConv"), ("torch", "rgcn", "compact"),
            ("dgl", "rgcn", "RelGraphConv"), ("pyg", "rgat", "RGATConv"), ("dgl", "rgat", "GATConv"),
            ("pyg", "hgt", "HGTConv"), ("dgl", "hgt", "HGTConv")]


def run(*args, python=sys.executable) -> str:
    return subprocess.run([python, *args], check=True, capture_output=True, text=True).stdout


def peer(path: str, system: str, model: str, variant: str, failures: list, hidden: int = 8) -> dict | None:
    p = subprocess.run([PYTHON[system], os.path.join(HERE, "rgnn_peer.py"), "--graph", path, "--system", system,
                        "--model", model, "--variant", variant, "--epochs", "3", "--hidden", str(hidden),
                        "--threads", "1", "--deadline", "300"], capture_output=True, text=True)
    name = f"{system}-{variant} ({model}) on {os.path.basename(path)}"
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        failures.append(f"{name}: exit {p.returncode}, no JSON: {p.stderr.strip()[-300:]}")
        return None
    if out["status"] != "ok":
        failures.append(f"{name}: {out['status']} {out.get('error')}")
        return None
    if not all(math.isfinite(v) for v in out["epoch_loss"]) or len(out["epoch_loss"]) != 4:
        failures.append(f"{name}: bad losses {out['epoch_loss']}")
    if not out.get("forward_seconds") or not out.get("backward_seconds"):
        failures.append(f"{name}: no forward/backward split")
    return out


def main() -> int:
    failures = []
    have_dgl = os.path.exists(PYTHON["dgl"])
    if not have_dgl:
        print(f"note: {os.path.relpath(PYTHON['dgl'], ROOT)} is missing (bench/peers/setup.sh --dgl): "
              f"DGL's variants are not checked")
    with tempfile.TemporaryDirectory() as tmp:
        onehot = os.path.join(tmp, "onehot.h5")
        plain = os.path.join(tmp, "plain.h5")
        feats = os.path.join(tmp, "feats.h5")
        typed = os.path.join(tmp, "typed.h5")
        typed_feats = os.path.join(tmp, "typed-feats.h5")
        run(os.path.join(HERE, "make_test_graph.py"), onehot, "--nodes", "300", "--edges", "2000")
        run(os.path.join(HERE, "make_test_graph.py"), plain, "--nodes", "300", "--edges", "2000", "--seed", "1")
        run(os.path.join(HERE, "add_features.py"), plain, feats, "--dim", "16", "--classes", "5")
        run(os.path.join(HERE, "make_test_graph.py"), typed, "--nodes", "300", "--edges", "2000", "--seed", "2",
            "--node-types", "3")
        run(os.path.join(HERE, "add_features.py"), typed, typed_feats, "--keep-labels", "--dim", "8")
        g = graphfile.load(feats)
        if g.features is None or g.features.shape != (300, 16) or g.num_classes != 5 or not g.train.any():
            failures.append(f"add_features.py: unexpected file: {g.stats()}")
        if (g.train & g.test).any():
            failures.append("add_features.py: train and test overlap")
        before, after = graphfile.load(typed), graphfile.load(typed_feats)
        if after.features is None or after.features.shape != (300, 8) or after.num_node_types != 3 \
                or (before.labels != after.labels).any() or (before.train != after.train).any() \
                or before.num_classes != after.num_classes:
            failures.append("add_features.py --keep-labels: features missing or labels/masks changed")

        # RGCN: every variant, the same losses (DGL has no one-hot input: features only).
        for path in (onehot, feats, typed_feats):
            losses = {}
            for system, model, variant in VARIANTS:
                if model != "rgcn" or (system == "dgl" and (not have_dgl or path == onehot)):
                    continue
                out = peer(path, system, model, variant, failures)
                if out is not None:
                    losses[f"{system}-{variant}"] = out["epoch_loss"]
            ref = losses.get("pyg-RGCNConv")
            for name, got in losses.items():
                if ref and any(abs(a - b) > 1e-4 * max(1.0, abs(a)) for a, b in zip(ref, got)):
                    failures.append(f"{os.path.basename(path)}: {name} losses {got} differ from {ref}")
            print(f"rgcn on {os.path.basename(path)}: " + ", ".join(f"{v} {l[-1]:.5f}" for v, l in losses.items()))

        # RGAT and HGT: every variant runs, on one node type and on three.
        for path in (feats, typed_feats):
            done = []
            for system, model, variant in VARIANTS:
                if model == "rgcn" or (system == "dgl" and not have_dgl):
                    continue
                out = peer(path, system, model, variant, failures)
                if out is not None:
                    done.append(f"{system}-{variant} ({model}) {out['epoch_loss'][-1]:.5f}")
            print(f"rgat/hgt on {os.path.basename(path)}: " + ", ".join(done))
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    print("selftest: " + ("ok" if not failures else f"{len(failures)} failure(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
