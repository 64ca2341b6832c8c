"""Writes a synthetic heterogeneous graph in DGL's chunked graph format, as DGL's documentation defines it
("Chunked Graph Format", docs/source/guide/distributed-preprocessing.rst), with numpy and the standard
library alone: no Tessel code. Three node types of different sizes, float32 features of one width on
every type, labels (-1 = unlabelled) and train/val/test masks on the first; five edge types, among them
two with the same relation name (so the importer names them "src:rel:dst"), in NumPy and CSV chunks of
uneven counts, with duplicate edges and self-loops as real data has. At an odd SCALE the edge counts are
totals per type alone (num_edges_per_type), at an even one per chunk too. Deterministic in the seed.

usage: chunked_graph.py OUT_DIR [SCALE] [SEED]
"""
import json
import os
import sys

import numpy as np


def split(n, k):
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def main(out, scale=1, seed=7):
    rng = np.random.default_rng(seed)
    ntypes = {"paper": 700 * scale, "author": 450 * scale, "venue": 23}
    etypes = [("author", "writes", "paper", 2600, "numpy", 3),
              ("paper", "cites", "paper", 3100, "csv", 2),
              ("paper", "in", "venue", 700, "numpy", 1),
              ("author", "in", "venue", 300, "csv", 4),
              ("venue", "hosts", "author", 150, "numpy", 2)]
    dim, classes = 8, 5
    os.makedirs(f"{out}/edges", exist_ok=True)
    os.makedirs(f"{out}/node_data", exist_ok=True)
    meta = {"graph_name": "chunked-synthetic", "node_type": list(ntypes), "num_nodes_per_chunk": [],
            "edge_type": [], "num_edges_per_type": [], "num_edges_per_chunk": [], "edges": {},
            "node_data": {t: {} for t in ntypes}, "edge_data": {}}
    node_chunks = {t: split(n, 3 if t != "venue" else 1) for t, n in ntypes.items()}
    meta["num_nodes_per_chunk"] = [node_chunks[t] for t in ntypes]
    label = rng.integers(0, classes, ntypes["paper"])
    label[rng.random(ntypes["paper"]) < 0.2] = -1
    split_of = np.where(label >= 0, rng.random(ntypes["paper"]), 2.0)  # an unlabelled node is in no split
    data = {"paper": {"label": label.astype(np.int64), "train_mask": split_of < 0.5,
                      "val_mask": (split_of >= 0.5) & (split_of < 0.7), "test_mask": (split_of >= 0.7) & (split_of <= 1.0)}}
    for t, n in ntypes.items():
        centre = np.zeros((n, dim), dtype=np.float32)
        if t == "paper":
            centre[np.arange(n), np.maximum(label, 0) % dim] = 1.0
        feat = (centre + rng.normal(0, 0.5, (n, dim))).astype(np.float32)
        data.setdefault(t, {})["feat"] = feat
        data[t]["year"] = rng.integers(1990, 2024, n).astype(np.int64)  # a key the importer does not read
    for t, keys in data.items():
        for key, array in keys.items():
            paths, at = [], 0
            for c, size in enumerate(node_chunks[t]):
                path = f"node_data/{t}-{key}-{c}.npy"
                np.save(f"{out}/{path}", array[at:at + size])
                paths.append(path)
                at += size
            meta["node_data"][t][key] = {"format": {"name": "numpy"}, "data": paths}
    for i, (s, r, d, m, fmt, k) in enumerate(etypes):
        m *= scale
        src = rng.integers(0, ntypes[s], m)
        dst = rng.integers(0, ntypes[d], m)
        if s == d:
            src[:5], dst[:5] = dst[:5], dst[:5]  # self-loops
        src[5:9], dst[5:9] = src[9], dst[9]  # duplicates
        etype = f"{s}:{r}:{d}"
        sizes, paths, at = split(m, k), [], 0
        for c, size in enumerate(sizes):
            if fmt == "numpy":
                path = f"edges/{s}-{r}-{d}-{c}.npy"
                np.save(f"{out}/{path}", np.stack([src[at:at + size], dst[at:at + size]], axis=1).astype(np.int64))
            else:
                path = f"edges/{s}-{r}-{d}-{c}.csv"
                with open(f"{out}/{path}", "w") as f:
                    f.writelines(f"{a},{b}\n" for a, b in zip(src[at:at + size], dst[at:at + size]))
            paths.append(path)
            at += size
        meta["edge_type"].append(etype)
        meta["num_edges_per_type"].append(m)
        meta["num_edges_per_chunk"].append(sizes)
        fmt_spec = {"name": "numpy"} if fmt == "numpy" else {"name": "csv", "delimiter": ","}
        meta["edges"][etype] = {"format": fmt_spec, "data": paths}
    w0 = f"{etypes[0][0]}:{etypes[0][1]}:{etypes[0][2]}"
    np.save(f"{out}/edges/weight.npy", rng.random(etypes[0][3] * scale).astype(np.float32))
    meta["edge_data"] = {w0: {"weight": {"format": {"name": "numpy"}, "data": ["edges/weight.npy"]}}}
    meta["num_edges_per_chunk"][0] = None  # replaced below: the first type's chunks are checked by their sum
    if scale % 2 == 1:  # odd scales give per-type totals only, even ones per-chunk counts too
        del meta["num_edges_per_chunk"]
    else:
        meta["num_edges_per_chunk"][0] = split(etypes[0][3] * scale, etypes[0][5])
    with open(f"{out}/metadata.json", "w") as f:
        json.dump(meta, f, indent=2)
    total = sum(m * scale for (*_, m, _, _) in etypes)
    print(f"wrote {out}: {sum(ntypes.values())} nodes, {len(etypes)} edge types, {total} edges")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
