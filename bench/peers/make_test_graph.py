"""Writes a small random graph file in Tessel's layout, for testing the peers and the harness.

  python make_test_graph.py OUT.h5 [--nodes 500] [--relations 5] [--edges 3000] [--classes 4]
                           [--feature-dim 0] [--node-types 1] [--seed 0]

Relations are laid out as `tessel import` lays them out: R base, R inverse ("name^-1"), one "self_loop"
(with --node-types T > 1, as `tessel generate graph` does: the nodes split into T contiguous types, base
relation r goes from type r % T to type (r + r // T) % T, and one self-loop relation per type).
"""
import argparse

import numpy as np

import graphfile


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--relations", type=int, default=5)
    ap.add_argument("--edges", type=int, default=3000)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--feature-dim", type=int, default=0)
    ap.add_argument("--node-types", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    if a.node_types < 1 or a.node_types > a.nodes:
        ap.error("need 1 <= --node-types <= --nodes")
    rel = rng.integers(0, a.relations, a.edges)
    src = rng.integers(0, a.nodes, a.edges)
    dst = rng.integers(0, a.nodes, a.edges)
    base = []
    if a.node_types == 1:
        types = None
        for r in range(a.relations):
            pairs = np.unique(np.stack([src[rel == r], dst[rel == r]], 1), axis=0)
            base.append((f"rel{r}", pairs[:, 0], pairs[:, 1]))
    else:
        T = a.node_types
        counts = [a.nodes // T + (1 if t < a.nodes % T else 0) for t in range(T)]
        types = [(f"type{t}", counts[t]) for t in range(T)]
        for r in range(a.relations):
            st, dt = r % T, (r + r // T) % T
            m = rel == r
            pairs = np.unique(np.stack([src[m] % counts[st], dst[m] % counts[dt]], 1), axis=0)
            base.append((f"rel{r}", pairs[:, 0], pairs[:, 1], f"type{st}", f"type{dt}"))
    labels = rng.integers(0, a.classes, a.nodes)
    labels[rng.random(a.nodes) < 0.5] = -1
    split = rng.random(a.nodes)
    train = (labels >= 0) & (split < 0.8)
    test = (labels >= 0) & (split >= 0.8)
    feats = rng.standard_normal((a.nodes, a.feature_dim), dtype=np.float32) if a.feature_dim else None
    graphfile.write(a.out, "test", a.nodes, graphfile.with_inverse_and_self_loop(a.nodes, base, types),
                    num_classes=a.classes, labels=labels, train=train, test=test, features=feats,
                    fingerprint=f"make_test_graph seed={a.seed}", node_types=types)


if __name__ == "__main__":
    main()
