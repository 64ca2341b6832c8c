"""Writes AIFB in DGL's chunked graph format, as DGL's documentation defines it ("Chunked Graph Format",
docs/source/guide/distributed-preprocessing.rst), with numpy and the standard library alone: no Tessel
code. The graph is the one `tessel import rdf` builds (storage/rdf_import.h): every distinct subject and
object one "entity" node, in order of first appearance; one relation per predicate, sorted by IRI,
duplicate triples once, edges sorted by (src, dst); classes the sorted label strings. Inverse and
self-loop relations are left to the importer's flags, as DGL users add reverse edges themselves.

DGL splits an edge type "src:rel:dst" at its colons, so a predicate IRI cannot be a relation name there:
relation K (in IRI order) is "p<K>", and relations.tsv maps the names back.

usage: chunked_import.py TRIPLES.nt.gz TRAIN.tsv TEST.tsv OUT_DIR [CHUNKS]
"""
import gzip
import json
import os
import re
import sys

import numpy as np

TERM = re.compile(r'<[^>]*>|_:\S+|"(?:[^"\\]|\\.)*"(?:@[A-Za-z0-9-]+|\^\^<[^>]*>)?')


def chunks_of(n, k):
    """k chunk sizes that sum to n, as DGL's tools/chunk_graph.py splits an array."""
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def main(triples, train_tsv, test_tsv, out, k=2):
    nodes, edges = {}, {}
    with gzip.open(triples, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            terms = TERM.findall(line)
            if len(terms) != 3:
                raise SystemExit(f"{triples}: cannot parse: {line[:120]}")
            s, p, o = terms
            si = nodes.setdefault(s, len(nodes))
            oi = nodes.setdefault(o, len(nodes))
            edges.setdefault(p[1:-1], set()).add((si, oi))
    predicates = sorted(edges)
    n = len(nodes)

    def labels_of(path):
        with open(path, encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
        return [(r[0] if r[0].startswith("<") else f"<{r[0]}>", r[-1]) for r in rows if r and r[0]]

    train, test = labels_of(train_tsv), labels_of(test_tsv)
    classes = sorted({c for _, c in train + test})
    label = np.full(n, -1, dtype=np.int64)
    masks = {"train_mask": np.zeros(n, dtype=bool), "test_mask": np.zeros(n, dtype=bool)}
    for rows, mask in ((train, masks["train_mask"]), (test, masks["test_mask"])):
        for entity, c in rows:
            label[nodes[entity]] = classes.index(c)
            mask[nodes[entity]] = True

    os.makedirs(f"{out}/edges", exist_ok=True)
    os.makedirs(f"{out}/node_data", exist_ok=True)
    node_chunks = chunks_of(n, k)
    meta = {
        "graph_name": "aifb",
        "node_type": ["entity"],
        "num_nodes_per_chunk": [node_chunks],
        "edge_type": [],
        "num_edges_per_chunk": [],
        "edges": {},
        "node_data": {"entity": {}},
        "edge_data": {},
    }
    with open(f"{out}/relations.tsv", "w", encoding="utf-8") as names:
        for r, p in enumerate(predicates):
            etype = f"entity:p{r:03d}:entity"
            pairs = sorted(edges[p])
            sizes = chunks_of(len(pairs), k)
            paths, at = [], 0
            for c, size in enumerate(sizes):
                path = f"edges/p{r:03d}-part{c}.csv"
                with open(f"{out}/{path}", "w") as f:
                    f.writelines(f"{s} {d}\n" for s, d in pairs[at:at + size])
                paths.append(path)
                at += size
            meta["edge_type"].append(etype)
            meta["num_edges_per_chunk"].append(sizes)
            meta["edges"][etype] = {"format": {"name": "csv", "delimiter": " "}, "data": paths}
            names.write(f"p{r:03d}\t{p}\n")
    for key, array in [("label", label)] + list(masks.items()):
        paths, at = [], 0
        for c, size in enumerate(node_chunks):
            path = f"node_data/entity-{key}-part{c}.npy"
            np.save(f"{out}/{path}", array[at:at + size])
            paths.append(path)
            at += size
        meta["node_data"]["entity"][key] = {"format": {"name": "numpy"}, "data": paths}
    with open(f"{out}/metadata.json", "w") as f:
        json.dump(meta, f, indent=4)
    print(f"wrote {out}: {n} nodes, {len(predicates)} relations, "
          f"{sum(len(e) for e in edges.values())} edges, {len(train)} train and {len(test)} test labels, {k} chunks each")


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        raise SystemExit(__doc__)
    main(*sys.argv[1:5], *(int(a) for a in sys.argv[5:]))
