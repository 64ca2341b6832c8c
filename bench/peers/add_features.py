"""Copies a graph file and gives its nodes random features, labels and train/test masks (seeded).

  python add_features.py IN.h5 OUT.h5 [--dim 64] [--classes 16] [--train 0.1] [--test 0.1] [--seed 0]
  python add_features.py IN.h5 OUT.h5 --keep-labels [--dim 64] [--seed 0]

FB15k-237 has neither labels nor features, and a one-hot first layer over its 14,541 entities and 475
relations would hold 1.8 GB of weights. The benchmark therefore gives every node a float32 feature row
(so layer 1 is a typed linear [R, dim, hidden]) and a uniform random class; train and test are disjoint
random subsets. Both Tessel and the peers read the file this writes. Existing features, labels and masks
are replaced; everything else (relations, /meta) is copied unchanged, except num_classes (class_names
is dropped) and a note appended to source_fingerprint. Writes OUT.tmp-PID and renames it into place.

--keep-labels replaces the features only and keeps the file's labels, masks and classes: the benchmark's
feature-width matrix (sizes 32, 64, 128) derives one file per width this way from AIFB (real labels),
FB15k-237 (the random labels of the width-64 file) and the synthetic graph (its generator's labels).
"""
import argparse
import os
import shutil

import h5py
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--train", type=float, default=0.1)
    ap.add_argument("--test", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep-labels", action="store_true", help="replace the features only")
    a = ap.parse_args()
    if not (0 < a.train and a.train + a.test <= 1):
        ap.error("need 0 < --train and --train + --test <= 1")
    tmp = f"{a.output}.tmp-{os.getpid()}"
    shutil.copyfile(a.input, tmp)
    rng = np.random.default_rng(a.seed)
    str_t = h5py.string_dtype("utf-8")
    try:
        with h5py.File(tmp, "r+") as f:
            meta = f["meta"].attrs
            for t in meta["node_types"]:
                t = t.decode() if isinstance(t, bytes) else str(t)
                g = f[f"nodes/{t}"]
                n = int(g["count"][()])
                for k in ("features",) if a.keep_labels else ("features", "labels", "train", "val", "test"):
                    if k in g:
                        del g[k]
                # Contiguous (no chunks), so that Tessel can map it in place.
                g.create_dataset("features", data=rng.standard_normal((n, a.dim), dtype=np.float32))
                if a.keep_labels:
                    continue
                g.create_dataset("labels", data=rng.integers(0, a.classes, n, dtype=np.int64))
                u = rng.random(n)
                g.create_dataset("train", data=(u < a.train).astype(np.uint8))
                g.create_dataset("test", data=((u >= a.train) & (u < a.train + a.test)).astype(np.uint8))
            if not a.keep_labels:
                meta.modify("num_classes", np.int64(a.classes))
                if "class_names" in meta:  # names of the old classes no longer apply
                    del meta["class_names"]
            fp = meta.get("source_fingerprint", b"")
            fp = fp.decode() if isinstance(fp, bytes) else str(fp)
            note = (f"add_features(dim={a.dim},keep_labels,seed={a.seed})" if a.keep_labels else
                    f"add_features(dim={a.dim},classes={a.classes},train={a.train},test={a.test},seed={a.seed})")
            meta.create("source_fingerprint", f"{fp};{note}" if fp else note, dtype=str_t)
        os.replace(tmp, a.output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


if __name__ == "__main__":
    main()
