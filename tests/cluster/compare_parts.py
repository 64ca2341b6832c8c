"""Compares two partition directories field by field: every dataset and attribute of every part-K.h5
(h5py, bit for bit) and every key of partition.json, except what names the input rather than the parts
(the graph's path and hash, the partitioner's own time, the method's name when asked). Exit 1 naming the
first difference.

usage: compare_parts.py DIR_A DIR_B [--ignore-method]
"""
import json
import os
import sys

import h5py
import numpy as np

SKIP_ATTRS = {"graph_hash"}
SKIP_KEYS = {"graph", "graph_hash", "seconds"}


def items(f):
    out = {}
    def visit(name, obj):
        for k, v in obj.attrs.items():
            if k not in SKIP_ATTRS:
                out[f"{name}@{k}"] = v
        if isinstance(obj, h5py.Dataset):
            out[name] = obj[()]
    for k, v in f.attrs.items():
        if k not in SKIP_ATTRS:
            out[f"/@{k}"] = v
    f.visititems(visit)
    return out


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def main(a, b, ignore_method=False):
    ma, mb = (json.load(open(os.path.join(d, "partition.json"))) for d in (a, b))
    skip = SKIP_KEYS | ({"method"} if ignore_method else set())
    for key in sorted(set(ma) | set(mb)):
        if key not in skip and ma.get(key) != mb.get(key):
            sys.exit(f"partition.json: {key}: {ma.get(key)!r} vs {mb.get(key)!r}")
    for p in range(ma["parts"]):
        name = f"part-{p}.h5"
        with h5py.File(os.path.join(a, name)) as fa, h5py.File(os.path.join(b, name)) as fb:
            ia, ib = items(fa), items(fb)
            if set(ia) != set(ib):
                sys.exit(f"{name}: fields differ: {sorted(set(ia) ^ set(ib))}")
            for k in sorted(ia):
                if not same(ia[k], ib[k]):
                    sys.exit(f"{name}: {k} differs")
    print(f"{a} and {b}: {ma['parts']} parts, every field equal")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], len(sys.argv) == 4 and sys.argv[3] == "--ignore-method")
