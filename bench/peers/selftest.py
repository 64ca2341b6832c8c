"""Checks the peer side without Tessel: writes small graph files (one-hot and with features), trains
every variant of rgcn_torch.py on them for a few epochs, and checks that all variants report the same
losses (same model, same initial weights) and that add_features.py leaves a readable file.

  build/bench-venv/bin/python bench/peers/selftest.py      (needs bench/peers/setup.sh --peers)

Exit 0 when every check passes, 1 otherwise. Takes about half a minute.
"""
import json
import os
import subprocess
import sys
import tempfile

import graphfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(*args) -> str:
    return subprocess.run([sys.executable, *args], check=True, capture_output=True, text=True).stdout


def main() -> int:
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        onehot = os.path.join(tmp, "onehot.h5")
        plain = os.path.join(tmp, "plain.h5")
        feats = os.path.join(tmp, "feats.h5")
        run(os.path.join(HERE, "make_test_graph.py"), onehot, "--nodes", "300", "--edges", "2000")
        run(os.path.join(HERE, "make_test_graph.py"), plain, "--nodes", "300", "--edges", "2000", "--seed", "1")
        run(os.path.join(HERE, "add_features.py"), plain, feats, "--dim", "16", "--classes", "5")
        g = graphfile.load(feats)
        if g.features is None or g.features.shape != (300, 16) or g.num_classes != 5 or not g.train.any():
            failures.append(f"add_features.py: unexpected file: {g.stats()}")
        if (g.train & g.test).any():
            failures.append("add_features.py: train and test overlap")
        for path in (onehot, feats):
            losses = {}
            for variant in ("rgcn", "fast", "compact"):
                out = json.loads(run(os.path.join(HERE, "rgcn_torch.py"), "--graph", path, "--variant", variant,
                                     "--epochs", "3", "--hidden", "8", "--threads", "1"))
                if out["status"] != "ok":
                    failures.append(f"{variant} on {os.path.basename(path)}: {out['status']} {out.get('error')}")
                    continue
                losses[variant] = out["epoch_loss"]
            ref = losses.get("rgcn")
            for variant, got in losses.items():
                if ref and any(abs(a - b) > 1e-4 * max(1.0, abs(a)) for a, b in zip(ref, got)):
                    failures.append(f"{os.path.basename(path)}: {variant} losses {got} differ from {ref}")
            print(f"{os.path.basename(path)}: " + ", ".join(f"{v} {l[-1]:.5f}" for v, l in losses.items()))
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    print("selftest: " + ("ok" if not failures else f"{len(failures)} failure(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
