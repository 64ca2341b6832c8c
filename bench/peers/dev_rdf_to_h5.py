"""Stop-gap RDF importer: N-Triples (+ label TSVs) -> graph file, for developing the peers before
`tessel import rdf` exists, and for cross-checking its sizes. run.sh never uses it: the benchmark's
numbers come from the file `tessel import rdf` writes.

  python dev_rdf_to_h5.py TRIPLES.nt[.gz] TRAIN.tsv TEST.tsv OUT.h5

Follows storage/rdf_import.h loosely: one node type, every distinct subject and object is a node
(literals included, by their raw term text), relations sorted by predicate IRI, then inverses, then one
self-loop relation; duplicate triples count once; classes are the sorted distinct label strings.
"""
import gzip
import sys

import numpy as np

import graphfile


def terms(line: str):
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    s, rest = line.split(" ", 1)
    p, o = rest.split(" ", 1)
    o = o.rstrip()
    if o.endswith("."):
        o = o[:-1].rstrip()
    return s, p.strip("<>"), o


def main() -> None:
    triples, train_tsv, test_tsv, out = sys.argv[1:5]
    opener = gzip.open if triples.endswith(".gz") else open
    nodes, rels, edges = {}, {}, set()
    with opener(triples, "rt", encoding="utf-8") as f:
        for line in f:
            t = terms(line)
            if t is None:
                continue
            s, p, o = t
            si = nodes.setdefault(s, len(nodes))
            oi = nodes.setdefault(o, len(nodes))
            edges.add((p, si, oi))
    n = len(nodes)
    preds = sorted({p for p, _, _ in edges})
    by_pred = {p: [] for p in preds}
    for p, s, o in edges:
        by_pred[p].append((s, o))
    base = []
    for p in preds:
        e = np.array(sorted(by_pred[p]), dtype=np.int64)
        base.append((p, e[:, 0], e[:, 1]))
    rows = {}
    for split, path in (("train", train_tsv), ("test", test_tsv)):
        with open(path, encoding="utf-8") as f:
            next(f)
            for line in f:
                cols = line.rstrip("\r\n").split("\t")
                if len(cols) >= 2:
                    rows[f"<{cols[0].strip('<>')}>"] = (split, cols[-1])
    classes = sorted({c for _, c in rows.values()})
    labels = np.full(n, -1, dtype=np.int64)
    train = np.zeros(n, bool)
    test = np.zeros(n, bool)
    for ent, (split, c) in rows.items():
        i = nodes[ent]
        labels[i] = classes.index(c)
        (train if split == "train" else test)[i] = True
    graphfile.write(out, "aifb_stripped", n, graphfile.with_inverse_and_self_loop(n, base),
                    num_classes=len(classes), labels=labels, train=train, test=test,
                    fingerprint="dev_rdf_to_h5")
    print(f"{out}: {n} nodes, {len(edges)} triples, {len(preds)} predicates, {len(classes)} classes, "
          f"{train.sum()} train, {test.sum()} test")


if __name__ == "__main__":
    main()
