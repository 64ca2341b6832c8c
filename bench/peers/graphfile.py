"""Reads a Tessel graph file (DESIGN.md "Graph file") into flat numpy arrays for the peer models.

Layout: /meta attrs (name, format_version, node_types, relation_names, num_classes);
/nodes/<type>/count, optional features f32 [n, d], labels i64 [n] (-1 = unlabelled), train/val/test u8 [n];
/relations/<i>/ attrs name, src_type, dst_type (type names), kind; datasets src, dst (int64, type-local).

Global node ids concatenate the node types in /meta node_types order, as Tessel's HeteroGraph does.
The relations already hold the inverses and the self-loop relation; nothing is added here.
Failure: ValueError naming the file and the dataset.
"""
from dataclasses import dataclass, field

import h5py
import numpy as np


@dataclass
class Graph:
    name: str
    num_nodes: int
    num_relations: int
    num_classes: int
    src: np.ndarray        # int64 [E], global ids, edges grouped by relation
    dst: np.ndarray        # int64 [E]
    etype: np.ndarray      # int64 [E], relation id of each edge
    rel_ptr: np.ndarray    # int64 [R + 1], edges of relation r are [rel_ptr[r], rel_ptr[r + 1])
    features: np.ndarray | None  # float32 [N, d] or None (featureless: one-hot input)
    labels: np.ndarray     # int64 [N], -1 = unlabelled
    train: np.ndarray      # bool [N]
    test: np.ndarray       # bool [N]
    relation_kinds: list = field(default_factory=list)
    # Node and relation types (HGT needs them; RGCN and RGAT see one global id space):
    node_type_names: list = field(default_factory=list)   # /meta node_types order
    node_type_offsets: np.ndarray | None = None           # int64 [T + 1], type t is [off[t], off[t + 1])
    relation_names: list = field(default_factory=list)
    rel_src_type: np.ndarray | None = None                # int64 [R], index into node_type_names
    rel_dst_type: np.ndarray | None = None                # int64 [R]

    @property
    def num_node_types(self) -> int:
        return len(self.node_type_names)

    @property
    def node_type(self) -> np.ndarray:
        """int64 [N]: the type of every global node id (ids are grouped by type)."""
        return np.repeat(np.arange(self.num_node_types, dtype=np.int64), np.diff(self.node_type_offsets))

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])

    def stats(self) -> dict:
        """Sizes a cost model needs: unique (relation, source) pairs and (relation, destination) pairs, and
        the nodes that are the source of some edge."""
        pairs_src = 0
        pairs_dst = 0
        for r in range(self.num_relations):
            a, b = self.rel_ptr[r], self.rel_ptr[r + 1]
            pairs_src += np.unique(self.src[a:b]).size
            pairs_dst += np.unique(self.dst[a:b]).size
        return {
            "nodes": self.num_nodes,
            "edges": self.num_edges,
            "relations": self.num_relations,
            "classes": self.num_classes,
            "feature_dim": 0 if self.features is None else int(self.features.shape[1]),
            "train_nodes": int(self.train.sum()),
            "unique_rel_src_pairs": int(pairs_src),
            "unique_rel_dst_pairs": int(pairs_dst),
            "source_nodes": int(np.unique(self.src).size),
        }


def _str(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def load(path: str, with_data: bool = True) -> Graph:
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ValueError(f"{path}: cannot open as HDF5: {e}") from e
    with f:
        if "meta" not in f:
            raise ValueError(f"{path}: missing /meta")
        meta = f["meta"].attrs
        node_types = [_str(t) for t in np.atleast_1d(meta["node_types"])]
        num_classes = int(meta.get("num_classes", 0))
        offsets, counts = {}, {}
        total = 0
        feats, labels, train, test = [], [], [], []
        for t in node_types:
            g = f.get(f"nodes/{t}")
            if g is None:
                raise ValueError(f"{path}: missing /nodes/{t}")
            n = int(g["count"][()])
            offsets[t], counts[t] = total, n
            total += n
            feats.append(np.asarray(g["features"], dtype=np.float32) if "features" in g else None)
            labels.append(np.asarray(g["labels"], dtype=np.int64) if "labels" in g
                          else np.full(n, -1, dtype=np.int64))
            train.append(np.asarray(g["train"], dtype=bool) if "train" in g else np.zeros(n, bool))
            test.append(np.asarray(g["test"], dtype=bool) if "test" in g else np.zeros(n, bool))
            for arr, what in ((labels[-1], "labels"), (train[-1], "train"), (test[-1], "test")):
                if arr.shape[0] != n:
                    raise ValueError(f"{path}: /nodes/{t}/{what} has {arr.shape[0]} rows, count is {n}")
        if any(x is not None for x in feats):
            if any(x is None for x in feats) or len({x.shape[1] for x in feats}) != 1:
                raise ValueError(f"{path}: features must be present with one width on every node type")
            features = np.concatenate(feats) if len(feats) > 1 else feats[0]
        else:
            features = None

        rels = f.get("relations")
        num_rel = len(rels) if rels is not None else 0
        srcs, dsts, ptr, kinds, rnames, rst, rdt = [], [], [0], [], [], [], []
        for r in range(num_rel):
            g = rels.get(str(r))
            if g is None:
                raise ValueError(f"{path}: missing /relations/{r}")
            st, dt = _str(g.attrs["src_type"]), _str(g.attrs["dst_type"])
            kinds.append(_str(g.attrs.get("kind", "base")))
            rnames.append(_str(g.attrs.get("name", str(r))))
            if st not in offsets or dt not in offsets:
                raise ValueError(f"{path}: /relations/{r}: unknown node type {st!r} or {dt!r}")
            rst.append(node_types.index(st))
            rdt.append(node_types.index(dt))
            s = np.asarray(g["src"], dtype=np.int64) if with_data else np.zeros(0, np.int64)
            d = np.asarray(g["dst"], dtype=np.int64) if with_data else np.zeros(0, np.int64)
            if s.shape != d.shape:
                raise ValueError(f"{path}: /relations/{r}: src and dst sizes differ")
            if s.size and (s.min() < 0 or s.max() >= counts[st] or d.min() < 0 or d.max() >= counts[dt]):
                raise ValueError(f"{path}: /relations/{r}: id out of range")
            srcs.append(s + offsets[st])
            dsts.append(d + offsets[dt])
            ptr.append(ptr[-1] + s.size)
        name = _str(meta.get("name", path))
    src = np.concatenate(srcs) if srcs else np.zeros(0, np.int64)
    dst = np.concatenate(dsts) if dsts else np.zeros(0, np.int64)
    rel_ptr = np.asarray(ptr, dtype=np.int64)
    etype = np.repeat(np.arange(num_rel, dtype=np.int64), np.diff(rel_ptr))
    all_labels = np.concatenate(labels)
    if num_classes <= 0 and (all_labels >= 0).any():
        num_classes = int(all_labels.max()) + 1
    return Graph(name=name, num_nodes=total, num_relations=num_rel, num_classes=num_classes,
                 src=src, dst=dst, etype=etype, rel_ptr=rel_ptr, features=features,
                 labels=all_labels, train=np.concatenate(train), test=np.concatenate(test),
                 relation_kinds=kinds, node_type_names=node_types,
                 node_type_offsets=np.asarray([offsets[t] for t in node_types] + [total], dtype=np.int64),
                 relation_names=rnames, rel_src_type=np.asarray(rst, dtype=np.int64),
                 rel_dst_type=np.asarray(rdt, dtype=np.int64))


def write(path: str, name: str, num_nodes: int, relations: list, num_classes: int = 0,
          labels=None, train=None, test=None, features=None, fingerprint: str = "",
          node_types: list | None = None) -> None:
    """Writes a graph file in the layout above.

    node_types: [(type name, count)] in global id order; default one type, ("entity", num_nodes).
    relations: list of (name, kind, src, dst) with kind "base" | "inverse" | "self_loop", ids local to the
    one node type, or (name, kind, src, dst, src_type, dst_type) with type-local ids.
    labels, train, test, features: global arrays [num_nodes, ...], split by node type here.
    Strings are variable-length UTF-8, as Tessel writes them. For tests and cross-checks only; the
    benchmark's graph files come from `tessel import` and `tessel generate`.
    """
    node_types = node_types or [("entity", num_nodes)]
    if sum(n for _, n in node_types) != num_nodes:
        raise ValueError(f"{path}: node type counts do not add up to {num_nodes}")
    str_t = h5py.string_dtype("utf-8")
    with h5py.File(path, "w", libver=("v108", "latest")) as f:
        meta = f.create_group("meta")
        meta.attrs.create("name", name, dtype=str_t)
        meta.attrs.create("format_version", np.int64(1))
        meta.attrs.create("node_types", [t for t, _ in node_types], dtype=str_t)
        meta.attrs.create("relation_names", [r[0] for r in relations], dtype=str_t)
        meta.attrs.create("num_classes", np.int64(num_classes))
        meta.attrs.create("source_fingerprint", fingerprint, dtype=str_t)
        lo = 0
        for tname, n in node_types:
            g = f.create_group(f"nodes/{tname}")
            g.create_dataset("count", data=np.int64(n))
            if features is not None:
                g.create_dataset("features", data=np.asarray(features, dtype=np.float32)[lo:lo + n])
            if labels is not None:
                g.create_dataset("labels", data=np.asarray(labels, dtype=np.int64)[lo:lo + n])
            for mask_name, mask in (("train", train), ("test", test)):
                if mask is not None:
                    g.create_dataset(mask_name, data=np.asarray(mask, dtype=np.uint8)[lo:lo + n])
            lo += n
        rels = f.create_group("relations")
        default = node_types[0][0]
        for i, rel in enumerate(relations):
            rname, kind, s, d = rel[:4]
            st, dt = rel[4:6] if len(rel) >= 6 else (default, default)
            r = rels.create_group(str(i))
            for k, v in (("name", rname), ("src_type", st), ("dst_type", dt), ("kind", kind)):
                r.attrs.create(k, v, dtype=str_t)
            r.create_dataset("src", data=np.asarray(s, dtype=np.int64))
            r.create_dataset("dst", data=np.asarray(d, dtype=np.int64))


def with_inverse_and_self_loop(num_nodes: int, base: list, node_types: list | None = None) -> list:
    """base: list of (name, src, dst) or (name, src, dst, src_type, dst_type) -> Tessel's relation order:
    bases, inverses "name^-1", then one "self_loop" per node type (node_types: [(name, count)])."""
    out, inv = [], []
    for b in base:
        n, s, d = b[:3]
        types = tuple(b[3:5])
        out.append((n, "base", s, d) + types)
        inv.append((n + "^-1", "inverse", d, s) + types[::-1])
    out += inv
    if node_types is None:
        ids = np.arange(num_nodes, dtype=np.int64)
        out.append(("self_loop", "self_loop", ids, ids))
    else:
        for t, count in node_types:
            ids = np.arange(count, dtype=np.int64)
            out.append((f"self_loop_{t}" if len(node_types) > 1 else "self_loop", "self_loop", ids, ids, t, t))
    return out
