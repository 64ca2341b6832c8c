"""Writes a Tessel graph file (.h5) as DGL's chunked graph format with h5py and numpy: every node type's
features, labels and masks, and every base relation (the derived ones are left to --add-inverse and
--add-self-loop, as a DGL user adds reverse edges), each array in CHUNKS chunks. Relation K is named
"r<K>" (DGL splits an edge type at its colons, and imported relation names may hold any character).

usage: to_chunked.py GRAPH.h5 OUT_DIR [CHUNKS]
"""
import json
import os
import sys

import h5py
import numpy as np


def split(n, k):
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def main(graph, out, k=4):
    os.makedirs(f"{out}/edges", exist_ok=True)
    os.makedirs(f"{out}/node_data", exist_ok=True)
    with h5py.File(graph, "r") as f:
        types = [t.decode() for t in f["meta"].attrs["node_types"]]
        counts = [int(f[f"nodes/{t}/count"][()]) for t in types]
        meta = {"graph_name": f["meta"].attrs["name"].decode(), "node_type": types,
                "num_nodes_per_chunk": [split(n, k) for n in counts], "edge_type": [], "num_edges_per_chunk": [],
                "edges": {}, "node_data": {t: {} for t in types}, "edge_data": {}}
        for t, n in zip(types, counts):
            for key, name in (("features", "feat"), ("labels", "label"), ("train", "train_mask"),
                              ("val", "val_mask"), ("test", "test_mask")):
                if key not in f[f"nodes/{t}"]:
                    continue
                array = f[f"nodes/{t}/{key}"][()]
                if name.endswith("_mask"):
                    array = array.astype(bool)
                paths, at = [], 0
                for c, size in enumerate(split(n, k)):
                    path = f"node_data/{t}-{name}-{c}.npy"
                    np.save(f"{out}/{path}", array[at:at + size])
                    paths.append(path)
                    at += size
                meta["node_data"][t][name] = {"format": {"name": "numpy"}, "data": paths}
        r = 0
        for key in sorted(f["relations"], key=int):
            rel = f[f"relations/{key}"]
            if rel.attrs["kind"].decode() != "base":
                continue
            etype = f"{rel.attrs['src_type'].decode()}:r{r}:{rel.attrs['dst_type'].decode()}"
            pairs = np.stack([rel["src"][()], rel["dst"][()]], axis=1).astype(np.int64)
            sizes, paths, at = split(len(pairs), k), [], 0
            for c, size in enumerate(sizes):
                path = f"edges/r{r}-{c}.npy"
                np.save(f"{out}/{path}", pairs[at:at + size])
                paths.append(path)
                at += size
            meta["edge_type"].append(etype)
            meta["num_edges_per_chunk"].append(sizes)
            meta["edges"][etype] = {"format": {"name": "numpy"}, "data": paths}
            r += 1
    with open(f"{out}/metadata.json", "w") as f:
        json.dump(meta, f, indent=1)
    print(f"wrote {out}: {sum(counts)} nodes, {r} base relations, {k} chunks each")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:]))
