"""Reference trainers for RGCN, RGAT and HGT, outside Tessel, in PyTorch (issue 18). Each one reads the
same graph file, labels and split as a Tessel job, trains full-graph with the same hyperparameters, and
prints the loss of every epoch and the test accuracy.

  python rgnn_reference.py train --graph G.h5 --model rgcn|rgat|hgt [--system reference|pyg]
         [--layers 2] [--hidden 16] [--heads 1] [--head-merge concat|mean] [--bases 0] [--blocks 0]
         [--bias] [--weight-init glorot|torch_linear] [--epochs 50] [--lr 0.01] [--l2 0] [--seed 0]
         [--threads 2] [--dtype float32|float64] [--json OUT]
  python rgnn_reference.py parity CASE.json [CASE.json ...]

Systems:
  reference  the model as its paper's code defines it, in plain PyTorch:
             rgcn  tkipf/relational-gcn (rgcn/layers/graph.py and train.py, commit 71e79de): per relation
                   r, A_r X W_r with A_r row-normalised (1 / |N_r(i)|); W_r a full matrix, or
                   sum_b coef[r, b] V_b (num_bases), or block-diagonal (num_blocks: the paper's section 2.2;
                   its entity-classification code has only bases, so blocks are drawn as PyG's RGCNConv
                   draws them); no bias; ReLU between layers; one-hot input for a featureless graph.
                   Initialisation as the paper's code: Keras 1's glorot_uniform on each (in, out) matrix
                   W_r or V_b, on coef as an (R, B) matrix (fan-in R, fan-out B); blocks glorot over each
                   (in/B, out/B) block. Regulariser as the paper's code: Keras' l2(L2) on every weight of
                   the first layer (the bases and the coefficients both), that is l2 * sum(w^2) added to
                   the loss.
             rgat  workers/rgnn/MODELS.md's RGAT: PyG's RGATConv computation (across-relation softmax,
                   additive self-attention, LeakyReLU 0.2, heads concatenated or averaged, no bias) with
                   an attention vector per relation and head (Busbridge et al.'s per-relation Q^(r),
                   K^(r) with D = 1), where RGATConv shares one q and one k across relations.
             hgt   PyG's HGTConv itself (Hu et al. 2020), then a bias-free Linear classifier; its K/Q/V and
                   output biases held at zero, or, with --bias (Tessel's model.bias), trained.
             --weight-init (Tessel's model.weight_init): glorot as above (biases 0), or torch_linear:
             U(+-1/sqrt(fan_in)) for weights (fan-in: the second-to-last dimension) and biases (the fan-in
             of their weight), as torch.nn.Linear and PyG's HGTConv draw them.
  pyg        PyG's own layers with their own initialisation: FastRGCNConv (RGCNConv's model, its faster
             documented variant; aggr "mean", no root weight, no bias; num_bases / num_blocks), RGATConv
             (the settings above, its shared q and k), HGTConv (its biases) + a bias-free Linear; PyG's
             own initialisation whatever --weight-init says. RGATConv multiplies every edge's one-hot row
             by W_r[edge] (materialising [E, N, out]); here a one-hot input takes row src of W_r instead, the same
             product (RgatConvOneHot below). Only the rows are looked up; every other step is RGATConv's.
Every system: softmax cross-entropy averaged over the labelled train nodes; torch.optim.Adam (betas 0.9 /
0.999, eps 1e-8), one step per epoch; the regulariser l2 * sum(w^2) over the first layer's parameters
only (in the pyg system: Adam's weight_decay = 2 * l2 on them, the same gradient), as Tessel's train.l2
(jobs/README.md). Test accuracy: argmax (first maximum) over the test nodes after the last epoch.

parity: CASE.json is written by Tessel's rgnn_parity_export (tests/integration/rgnn_parity.sh): Tessel's
initial parameters, the first epoch's loss, gradients and Adam step computed from them in double precision
by the naive reference of MODELS.md, and Tessel's float executor's. This computes the same epoch here in
float64 from the same initial parameters, with the reference system, and checks, per parameter:
  - the initial values lie within their bound (the paper's Glorot, or torch_linear's 1/sqrt(fan_in)) and
    reach 3/4 of it on tensors of >= 64 values; glorot biases are 0; rel_prior and skip are 1: a changed
    initialisation fails;
  - the loss and every gradient of the cross-entropy agree to 1e-10 (relative: |a - b| <= 1e-10 x the
    tensor's largest |b|);
  - the gradient of the whole objective (cross-entropy + the regulariser) agrees to 1e-10: Tessel's
    gradient plus its Adam's coupled decay (l2_decay x w on the parameters it decays) against autograd of
    l2 * sum(w^2) over the paper's tensors: penalising the coefficients less, or the second layer, fails;
  - the parameters after one Adam step agree to 1e-10; Tessel's float executor agrees to 2e-4;
  - Tessel's executor in double (train.precision = "fp64": the plugin kernels' double instantiations,
    through the same layers, loss and Adam as a run), from the same initial parameters: its loss, every
    gradient and the parameters after its Adam step agree with this float64 epoch to 1e-10.
Prints a table; exit 0 when every check holds, 1 otherwise.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

import graphfile

PARITY_TOL = 1e-10
F32_TOL = 2e-4
# RGAT's LeakyReLU slope as Tessel's kernels get it: the op's negative_slope is a float (<tessel/ops/rgnn.h>),
# 0.2f = 0.2 + 3e-9, which the fp64 executor's 1e-10 comparison would see.
RGAT_SLOPE = float(np.float32(0.2))


def glorot_bound(shape) -> float:
    """Glorot uniform over the last two dimensions (Keras 1's glorot_uniform on each 2-D weight)."""
    return math.sqrt(6.0 / (shape[-2] + shape[-1]))


def init_bound(name: str, shapes: dict, weight_init: str) -> float:
    """The bound of U(-b, b) a weight or bias is drawn from (0: a glorot bias, all zeros)."""
    if name.endswith("_bias"):
        if weight_init == "glorot":
            return 0.0
        return 1.0 / math.sqrt(shapes[name[:-len("_bias")]][-2])  # the fan-in of its weight
    if weight_init == "glorot":
        return glorot_bound(shapes[name])
    return 1.0 / math.sqrt(shapes[name][-2])


def param_shapes(a, g, d0: int) -> dict:
    """Every parameter, named and shaped as workers/rgnn/MODELS.md names them (Tessel's names)."""
    R, T, C, L, H = g.num_relations, g.num_node_types, g.num_classes, a.layers, a.hidden
    shapes = {}
    if a.model == "rgcn":
        dims = [d0] + [H] * (L - 1) + [C]
        for l in range(L):
            K, D = dims[l], dims[l + 1]
            if a.bases > 0:
                shapes[f"layer{l}.bases"] = (a.bases, K, D)
                shapes[f"layer{l}.coef"] = (R, a.bases)
            elif a.blocks > 0 and K % a.blocks == 0 and D % a.blocks == 0:
                shapes[f"layer{l}.blocks"] = (R, a.blocks, K // a.blocks, D // a.blocks)
            else:
                shapes[f"layer{l}.weight"] = (R, K, D)
    elif a.model == "rgat":
        dims = [d0] + [H] * (L - 1) + [C]
        for l in range(L):
            last = l + 1 == L
            Dp = C if last else (H // a.heads if a.head_merge == "concat" else H)
            shapes[f"layer{l}.weight"] = (R, dims[l], a.heads * Dp)
            shapes[f"layer{l}.att_src"] = (R, a.heads, Dp)
            shapes[f"layer{l}.att_dst"] = (R, a.heads, Dp)
    else:
        d = H // a.heads
        for l in range(L):
            K = d0 if l == 0 else H
            for p in ("k", "q", "v"):
                shapes[f"layer{l}.{p}"] = (T, K, H)
            shapes[f"layer{l}.out"] = (T, H, H)
            if a.bias:
                for p in ("k", "q", "v", "out"):
                    shapes[f"layer{l}.{p}_bias"] = (T, H)
            if K == H:
                shapes[f"layer{l}.skip"] = (T,)
            shapes[f"layer{l}.rel_att"] = (R, a.heads, d, d)
            shapes[f"layer{l}.rel_msg"] = (R, a.heads, d, d)
            shapes[f"layer{l}.rel_prior"] = (R, a.heads)
        shapes["classifier.weight"] = (H, C)
    return shapes


def ones_init(name: str) -> bool:
    return name.endswith(".rel_prior") or name.endswith(".skip")


def draw_init(shapes: dict, seed: int, weight_init: str) -> dict:
    """The reference's own initial values (the paper's Glorot or torch_linear; rel_prior and skip 1, as
    PyG)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes.items():
        if ones_init(name):
            out[name] = np.ones(shape)
        else:
            b = init_bound(name, shapes, weight_init)
            out[name] = rng.uniform(-b, b, shape) if b > 0 else np.zeros(shape)
    return out


def load_init(stem: str, shapes: dict) -> dict:
    """Tessel's initial parameters as rgnn_parity_export init_only=1 writes them: STEM.json (name, shape,
    offset of each) and STEM.bin (float32). The names and shapes must be the model's."""
    with open(stem + ".json") as f:
        index = json.load(f)
    flat = np.fromfile(stem + ".bin", dtype=np.float32)
    got = {q["name"]: tuple(q["shape"]) for q in index}
    if got != {n: tuple(s) for n, s in shapes.items()}:
        raise ValueError(f"{stem}.json: parameters {sorted(got.items())}, the model has {sorted(shapes.items())}")
    return {q["name"]: flat[q["offset"]:q["offset"] + int(np.prod(q["shape"]))].reshape(q["shape"]).astype(np.float64)
            for q in index}


class Problem:
    """The graph as tensors: edges (global ids), the RGCN norm, labels and the split, the input."""

    def __init__(self, torch, g, dtype, onehot: bool):
        self.g = g
        self.N = g.num_nodes
        self.src = torch.from_numpy(g.src)
        self.dst = torch.from_numpy(g.dst)
        self.etype = torch.from_numpy(g.etype)
        key = g.etype * g.num_nodes + g.dst
        _, inv, count = np.unique(key, return_inverse=True, return_counts=True)
        self.norm = torch.from_numpy(1.0 / count[inv]).to(dtype)  # 1 / |N_r(i)|: A_r row-normalised
        self.onehot = onehot or g.features is None
        self.x = None if self.onehot else torch.from_numpy(g.features).to(dtype)
        self.d0 = self.N if self.onehot else g.features.shape[1]
        self.y = torch.from_numpy(g.labels)
        self.train_idx = torch.from_numpy(np.flatnonzero(g.train & (g.labels >= 0)))
        self.test_idx = torch.from_numpy(np.flatnonzero(g.test & (g.labels >= 0)))


def relation_rows(torch, P, W, h, nodes):
    """(h W_r)[node] for every edge's relation r: a row of W_r for a one-hot input."""
    if h is None:
        return W[P.etype, nodes]
    return torch.bmm(h[nodes].unsqueeze(1), W[P.etype]).squeeze(1)


def rgcn_weight(torch, p, l):
    if f"layer{l}.bases" in p:  # W_r = sum_b coef[r, b] V_b (the paper's code: K.dot(W_comp, W))
        return torch.einsum("rb,bkd->rkd", p[f"layer{l}.coef"], p[f"layer{l}.bases"])
    if f"layer{l}.blocks" in p:  # W_r = blockdiag(Q_r1, ..., Q_rB)
        q = p[f"layer{l}.blocks"]
        R, B, k, d = q.shape
        eye = torch.eye(B, dtype=q.dtype)
        return torch.einsum("rbkd,bc->rbkcd", q, eye).reshape(R, B * k, B * d)
    return p[f"layer{l}.weight"]


def forward_reference(torch, a, P, p):
    """Logits [N, C] of the reference system, from Tessel-named leaf tensors p."""
    import torch.nn.functional as F
    from torch_geometric.utils import softmax

    if a.model == "hgt":
        return forward_hgt(torch, a, P, p)
    h = P.x
    for l in range(a.layers):
        if a.model == "rgcn":
            W = rgcn_weight(torch, p, l)
            D = W.shape[-1]
            msg = relation_rows(torch, P, W, h, P.src) * P.norm.unsqueeze(1)
            out = torch.zeros(P.N, D, dtype=W.dtype).index_add_(0, P.dst, msg)
        else:
            W, att_s, att_d = p[f"layer{l}.weight"], p[f"layer{l}.att_src"], p[f"layer{l}.att_dst"]
            Hh, Dp = att_s.shape[1], att_s.shape[2]
            zs = relation_rows(torch, P, W, h, P.src).view(-1, Hh, Dp)
            zd = relation_rows(torch, P, W, h, P.dst).view(-1, Hh, Dp)
            raw = (zs * att_s[P.etype]).sum(-1) + (zd * att_d[P.etype]).sum(-1)
            alpha = softmax(F.leaky_relu(raw, RGAT_SLOPE), P.dst, num_nodes=P.N)  # across relations
            agg = torch.zeros(P.N, Hh, Dp, dtype=W.dtype).index_add_(0, P.dst, alpha.unsqueeze(-1) * zs)
            last = l + 1 == a.layers
            out = agg.mean(1) if last or a.head_merge == "mean" else agg.reshape(P.N, Hh * Dp)
        h = out if l + 1 == a.layers else F.relu(out)
    return h


def hgt_inputs(torch, P, dtype):
    g = P.g
    ntypes = [f"t{t}" for t in range(g.num_node_types)]
    off = g.node_type_offsets
    x = torch.eye(P.N, dtype=dtype) if P.onehot else P.x
    x_dict = {ntypes[t]: x[off[t]:off[t + 1]] for t in range(g.num_node_types)}
    edges = {}
    for r in range(g.num_relations):
        st, dt = int(g.rel_src_type[r]), int(g.rel_dst_type[r])
        lo, hi = g.rel_ptr[r], g.rel_ptr[r + 1]
        edges[(ntypes[st], f"r{r}", ntypes[dt])] = torch.from_numpy(
            np.stack([g.src[lo:hi] - off[st], g.dst[lo:hi] - off[dt]]))
    return ntypes, x_dict, edges


def patch_hetero_linear(torch):
    """HeteroLinear (HGTConv's k_rel and v_rel) without pyg_lib falls back to a loop of slice assignments
    (out[start:end] = x[start:end] @ W[i]), whose backward zero-fills a gradient of the whole input once
    per type: on AIFB (91 relations, so 91 types per head, 754k rows) 26 s an epoch. pyg_lib's
    segment_matmul is not on PyPI, so this replaces the fallback by the same products through split and
    cat (the backward of a split is one cat): the same numbers, the peer at its best."""
    from torch_geometric.nn.dense.linear import HeteroLinear

    def forward_split(self, x, type_ptr):
        sizes = (type_ptr[1:] - type_ptr[:-1]).tolist()
        return torch.cat([xs @ w for xs, w in zip(x.split(sizes), self.weight.unbind(0))])
    HeteroLinear.forward_naive = forward_split


def forward_hgt(torch, a, P, p):
    """PyG's HGTConv run with Tessel's parameters (torch.func.functional_call): K/Q/V per node type as
    kqv_lin's [k | q | v] columns, out as out_lin, rel_att / rel_msg as k_rel / v_rel (type h * E + e),
    rel_prior as p_rel, skip as skip, k/q/v_bias as kqv_lin's bias and out_bias as out_lin's (zero when
    the model has none)."""
    from torch.func import functional_call
    from torch_geometric.nn import HGTConv

    dtype = p["classifier.weight"].dtype
    if not hasattr(P, "hgt"):
        patch_hetero_linear(torch)
        ntypes, x_dict, edges = hgt_inputs(torch, P, dtype)
        metadata = (ntypes, list(edges))
        convs = [HGTConv(P.d0 if l == 0 else a.hidden, a.hidden, metadata, heads=a.heads).to(dtype)
                 for l in range(a.layers)]
        P.hgt = (ntypes, x_dict, edges, convs)
    ntypes, x_dict, edges, convs = P.hgt
    E = len(edges)
    h = x_dict
    for l, conv in enumerate(convs):
        k, q, v, out = (p[f"layer{l}.{n}"] for n in ("k", "q", "v", "out"))
        Hh, d = p[f"layer{l}.rel_att"].shape[1], p[f"layer{l}.rel_att"].shape[2]
        state = {"k_rel.weight": p[f"layer{l}.rel_att"].transpose(0, 1).reshape(Hh * E, d, d),
                 "v_rel.weight": p[f"layer{l}.rel_msg"].transpose(0, 1).reshape(Hh * E, d, d)}
        for t, name in enumerate(ntypes):
            state[f"kqv_lin.lins.{name}.weight"] = torch.cat([k[t], q[t], v[t]], dim=1).t()
            state[f"out_lin.lins.{name}.weight"] = out[t].t()
            if f"layer{l}.k_bias" in p:
                state[f"kqv_lin.lins.{name}.bias"] = torch.cat([p[f"layer{l}.{n}_bias"][t] for n in ("k", "q", "v")])
                state[f"out_lin.lins.{name}.bias"] = p[f"layer{l}.out_bias"][t]
            else:
                state[f"kqv_lin.lins.{name}.bias"] = torch.zeros(3 * a.hidden, dtype=dtype)
                state[f"out_lin.lins.{name}.bias"] = torch.zeros(a.hidden, dtype=dtype)
            if f"layer{l}.skip" in p:
                state[f"skip.{name}"] = p[f"layer{l}.skip"][t:t + 1]
        for e, et in enumerate(edges):
            state[f"p_rel.{'__'.join(et)}"] = p[f"layer{l}.rel_prior"][e].view(1, Hh)
        res = functional_call(conv, state, (h, edges), strict=False)
        h = {t: res[t] if res.get(t) is not None else torch.zeros(h[t].shape[0], a.hidden, dtype=dtype)
             for t in ntypes}
    return torch.cat([h[t] for t in ntypes]) @ p["classifier.weight"]


def objective(torch, a, P, p, logits):
    import torch.nn.functional as F
    loss = F.cross_entropy(logits[P.train_idx], P.y[P.train_idx])
    reg = sum((w * w).sum() for n, w in p.items() if n.startswith("layer0.")) * a.l2
    return loss, loss + reg


# ---- the pyg system -------------------------------------------------------------------------------

def build_pyg(torch, a, P, dtype):
    """PyG's layers with their own initialisation; returns (forward, first-layer params, other params)."""
    import torch.nn.functional as F
    from torch_geometric.nn import FastRGCNConv, HGTConv, RGATConv

    g = P.g
    edge_index = torch.stack([P.src, P.dst])
    L = a.layers
    dims = [P.d0] + [a.hidden] * (L - 1) + [g.num_classes]
    if a.model == "hgt":
        patch_hetero_linear(torch)
        ntypes, x_dict, edges = hgt_inputs(torch, P, dtype)
        convs = torch.nn.ModuleList(HGTConv(P.d0 if l == 0 else a.hidden, a.hidden, (ntypes, list(edges)),
                                            heads=a.heads) for l in range(L)).to(dtype)
        cls = torch.nn.Linear(a.hidden, g.num_classes, bias=False).to(dtype)

        def forward():
            h = x_dict
            for c in convs:
                res = c(h, edges)
                h = {t: res[t] if res.get(t) is not None else torch.zeros(h[t].shape[0], a.hidden, dtype=dtype)
                     for t in ntypes}
            return cls(torch.cat([h[t] for t in ntypes]))
        return forward, list(convs[0].parameters()), [q for c in convs[1:] for q in c.parameters()] + list(
            cls.parameters())
    convs = torch.nn.ModuleList()
    for l in range(L):
        last = l + 1 == L
        if a.model == "rgcn":
            blocks = a.blocks if a.blocks > 0 and dims[l] % a.blocks == 0 and dims[l + 1] % a.blocks == 0 else None
            convs.append(FastRGCNConv(dims[l], dims[l + 1], g.num_relations, num_bases=a.bases or None,
                                  num_blocks=blocks, aggr="mean", root_weight=False, bias=False, is_sorted=True))
        else:
            out = dims[l + 1] if last else (dims[l + 1] // a.heads if a.head_merge == "concat" else dims[l + 1])
            cls = RgatConvOneHot() if l == 0 and P.onehot else RGATConv
            convs.append(cls(dims[l], out, g.num_relations, heads=a.heads,
                             concat=not last and a.head_merge == "concat", bias=False,
                             attention_mechanism="across-relation", attention_mode="additive-self-attention",
                             negative_slope=0.2, dropout=0.0))
    convs = convs.to(dtype)

    def forward():
        h = None if P.onehot else P.x
        if h is None and a.model == "rgat":
            h = torch.arange(P.N)
        for l, c in enumerate(convs):
            h = c(h, edge_index, P.etype)
            if l + 1 < L:
                h = F.relu(h)
        return h
    return forward, list(convs[0].parameters()), [q for c in convs[1:] for q in c.parameters()]


def RgatConvOneHot():
    """RGATConv for a one-hot first layer: x is the node ids, and x_j W_r is row x_j of W_r. RGATConv's own
    message multiplies a one-hot row by W_r gathered per edge; the rest of this message is RGATConv's
    (its additive self-attention with the shared q and k, across-relation softmax, mod None)."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import RGATConv
    from torch_geometric.utils import softmax

    class Conv(RGATConv):
        def message(self, x_i, x_j, edge_type, edge_attr, index, ptr, size_i):
            if x_i.dtype != torch.long:
                return super().message(x_i, x_j, edge_type, edge_attr, index, ptr, size_i)
            outi = self.weight[edge_type, x_i]
            outj = self.weight[edge_type, x_j]
            alpha = F.leaky_relu(outi @ self.q + outj @ self.k, self.negative_slope)
            alpha = softmax(alpha, index, ptr, size_i)
            self._alpha = alpha
            return alpha.view(-1, self.heads, 1) * outj.view(-1, self.heads, self.out_channels)
    return Conv


# ---- train ----------------------------------------------------------------------------------------

def train(a) -> int:
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    os.environ["MKL_NUM_THREADS"] = str(a.threads)
    import torch
    import torch.nn.functional as F
    import warnings
    warnings.filterwarnings("ignore")
    torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    t0 = time.monotonic()
    g = graphfile.load(a.graph)
    if g.num_classes <= 0 or not g.train.any():
        print(f"rgnn_reference.py: {a.graph} has no labels or no train nodes", file=sys.stderr)
        return 2
    P = Problem(torch, g, dtype, onehot=a.input == "onehot")
    torch.manual_seed(a.seed)
    if a.system == "reference":
        shapes = param_shapes(a, g, P.d0)
        init = load_init(a.init, shapes) if a.init else draw_init(shapes, a.seed, a.weight_init)
        p = {n: torch.tensor(v, dtype=dtype, requires_grad=True) for n, v in init.items()}
        opt = torch.optim.Adam(list(p.values()), lr=a.lr, betas=(0.9, 0.999), eps=1e-8)

        def step():
            logits = forward_reference(torch, a, P, p)
            loss, obj = objective(torch, a, P, p, logits)
            return loss, obj

        def predict():
            return forward_reference(torch, a, P, p)
    else:
        forward, first, rest = build_pyg(torch, a, P, dtype)
        opt = torch.optim.Adam([{"params": first, "weight_decay": 2 * a.l2}, {"params": rest, "weight_decay": 0.0}],
                               lr=a.lr, betas=(0.9, 0.999), eps=1e-8)

        def step():
            loss = F.cross_entropy(forward()[P.train_idx], P.y[P.train_idx])
            return loss, loss

        predict = forward
    losses = []
    for _ in range(a.epochs):
        opt.zero_grad(set_to_none=True)
        loss, obj = step()
        obj.backward()
        opt.step()
        losses.append(float(loss.detach()))
    with torch.no_grad():
        pred = predict().argmax(1)
    acc = lambda idx: float((pred[idx] == P.y[idx]).to(torch.float64).mean()) if idx.numel() else None
    result = {"system": a.system, "model": a.model, "graph": a.graph, "seed": a.seed, "layers": a.layers,
              "hidden": a.hidden, "heads": a.heads, "head_merge": a.head_merge, "bases": a.bases, "init": a.init,
              "blocks": a.blocks, "bias": a.bias, "weight_init": a.weight_init, "epochs": a.epochs,
              "lr": a.lr, "l2": a.l2, "dtype": a.dtype, "torch": torch.__version__, "epoch_loss": losses, "train_accuracy": acc(P.train_idx),
              "test_accuracy": acc(P.test_idx), "seconds": round(time.monotonic() - t0, 3)}
    for e, l in enumerate(losses, 1):
        print(f"epoch {e:3d}  loss {l:.6f}", file=sys.stderr)
    print(f"test accuracy {result['test_accuracy']:.4f} ({P.test_idx.numel()} test nodes)", file=sys.stderr)
    text = json.dumps(result)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


# ---- parity ---------------------------------------------------------------------------------------

def parity(paths) -> int:
    import torch
    import warnings
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    failures = []
    rows = []
    for path in paths:
        with open(path) as f:
            case = json.load(f)
        name = os.path.splitext(os.path.basename(path))[0]
        a = argparse.Namespace(model=case["model"], layers=case["layers"], hidden=case["hidden"],
                               heads=case["heads"], head_merge=case["head_merge"], bases=case["num_bases"],
                               blocks=case["num_blocks"], l2=case["l2"], lr=case["lr"],
                               bias=case.get("bias", False), weight_init=case.get("weight_init", "glorot"))
        g = graphfile.load(case["graph"])
        P = Problem(torch, g, torch.float64, onehot=case["input"] == "onehot")
        shapes = param_shapes(a, g, P.d0)
        tessel = {q["name"]: q for q in case["params"]}

        def check(what, ok, detail):
            rows.append((name, what, "ok" if ok else "FAIL", detail))
            if not ok:
                failures.append(f"{name}: {what}: {detail}")

        check("parameter names and shapes", set(shapes) == set(tessel) and all(
            tuple(tessel[n]["shape"]) == tuple(s) for n, s in shapes.items()),
            f"reference {sorted(shapes.items())} vs Tessel {sorted((n, tuple(q['shape'])) for n, q in tessel.items())}"
            if set(shapes) != set(tessel) else "same")
        if failures and failures[-1].startswith(f"{name}: parameter names"):
            continue
        # The initialisation: each tensor's bound (Glorot or torch_linear); ones where PyG puts ones.
        bad_init = []
        for n, q in tessel.items():
            w = np.asarray(q["initial"])
            if ones_init(n):
                if not np.all(w == 1.0):
                    bad_init.append(f"{n} is not all ones")
                continue
            b = init_bound(n, shapes, a.weight_init)
            top = np.abs(w).max()
            if top > b * (1 + 1e-6) or (w.size >= 64 and top < 0.75 * b):
                bad_init.append(f"{n}: max |w| {top:.4g} against the bound {b:.4g}")
        check(f"initialisation ({a.weight_init} bounds, ones)", not bad_init,
              "; ".join(bad_init) or "within their bounds")

        p = {n: torch.tensor(np.asarray(tessel[n]["initial"]).reshape(shapes[n]), dtype=torch.float64,
                             requires_grad=True) for n in shapes}
        logits = forward_reference(torch, a, P, p)
        loss, obj = objective(torch, a, P, p, logits)
        grads = torch.autograd.grad(loss, list(p.values()), retain_graph=True, allow_unused=True)
        ograds = torch.autograd.grad(obj, list(p.values()), allow_unused=True)
        rel = abs(float(loss) - case["loss"]) / abs(case["loss"])
        check("loss (double)", rel <= PARITY_TOL, f"{float(loss):.15g} vs {case['loss']:.15g}: {rel:.2e}")
        rel32 = abs(float(loss) - case["tessel_f32_loss"]) / abs(case["loss"])
        check("loss (Tessel's float executor)", rel32 <= F32_TOL, f"{rel32:.2e}")
        rel64 = abs(float(loss) - case["tessel_f64_loss"]) / abs(float(loss))
        check("loss (Tessel's fp64 executor)", rel64 <= PARITY_TOL, f"{rel64:.2e}")

        def worst(ours, theirs):
            theirs = np.asarray(theirs, dtype=np.float64)
            ours = np.zeros_like(theirs) if ours is None else ours.detach().numpy().reshape(-1)
            scale = max(np.abs(theirs).max(), 1e-300)
            return float(np.abs(ours - theirs).max() / scale)

        for (n, gr), og in zip(zip(p, grads), ograds):
            q = tessel[n]
            e = worst(gr, q["grad"])
            check(f"grad {n}", e <= PARITY_TOL, f"{e:.2e}")
            # Tessel's objective gradient: its data gradient plus its Adam's coupled decay.
            decay = case["l2_decay"] if q["decayed"] else 0.0
            tessel_obj = np.asarray(q["grad"]) + decay * np.asarray(q["initial"])
            e = worst(og, tessel_obj)
            check(f"objective grad {n}", e <= PARITY_TOL,
                  f"{e:.2e} (Tessel decays it by {decay:g}; the paper's penalty is "
                  f"{'2 x l2 = ' + format(2 * a.l2, 'g') if n.startswith('layer0.') else 'none'})")
            e = worst(torch.from_numpy(np.asarray(q["tessel_f32_grad"])), q["grad"])
            check(f"grad {n} (Tessel's float executor)", e <= F32_TOL, f"{e:.2e}")
            e = worst(torch.from_numpy(np.asarray(q["tessel_f64_grad"])),
                      np.zeros(np.asarray(q["grad"]).shape) if gr is None else gr.detach().numpy().reshape(-1))
            check(f"grad {n} (Tessel's fp64 executor)", e <= PARITY_TOL, f"{e:.2e}")
        opt = torch.optim.Adam(list(p.values()), lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
        for w, og in zip(p.values(), ograds):
            w.grad = torch.zeros_like(w) if og is None else og
        opt.step()
        for n, w in p.items():
            e = worst(w, tessel[n]["after_step"])
            check(f"after Adam {n}", e <= PARITY_TOL, f"{e:.2e}")
            e = worst(torch.from_numpy(np.asarray(tessel[n]["tessel_f32_after_step"])), tessel[n]["after_step"])
            check(f"after Adam {n} (Tessel's float executor)", e <= F32_TOL, f"{e:.2e}")
            e = worst(torch.from_numpy(np.asarray(tessel[n]["tessel_f64_after_step"])), w.detach().numpy().reshape(-1))
            check(f"after Adam {n} (Tessel's fp64 executor)", e <= PARITY_TOL, f"{e:.2e}")
    width = max(len(r[0]) for r in rows) if rows else 4
    wwhat = max(len(r[1]) for r in rows) if rows else 4
    print(f"{'case':<{width}}  {'check':<{wwhat}}  result  detail (relative difference)")
    for r in rows:
        print(f"{r[0]:<{width}}  {r[1]:<{wwhat}}  {r[2]:<6}  {r[3]}")
    if failures:
        print(f"\n{len(failures)} check(s) failed:", file=sys.stderr)
        for f_ in failures:
            print("  " + f_, file=sys.stderr)
        return 1
    print(f"\nall {len(rows)} checks hold (parity tolerance {PARITY_TOL:g}, also for the fp64 executor; "
          f"float executor {F32_TOL:g})")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train one model and print its losses and test accuracy")
    t.add_argument("--graph", required=True)
    t.add_argument("--model", choices=["rgcn", "rgat", "hgt"], required=True)
    t.add_argument("--system", choices=["reference", "pyg"], default="reference")
    t.add_argument("--input", choices=["auto", "onehot"], default="auto",
                   help="auto: the graph's features, one-hot ids without; onehot: ids even with features")
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--hidden", type=int, default=16)
    t.add_argument("--heads", type=int, default=1)
    t.add_argument("--head-merge", choices=["concat", "mean"], default="concat")
    t.add_argument("--bases", type=int, default=0)
    t.add_argument("--blocks", type=int, default=0)
    t.add_argument("--bias", action="store_true", help="hgt: trained K/Q/V and output biases (model.bias)")
    t.add_argument("--weight-init", choices=["glorot", "torch_linear"], default="glorot",
                   help="the reference system's draws (model.weight_init); pyg keeps PyG's own")
    t.add_argument("--epochs", type=int, default=50)
    t.add_argument("--lr", type=float, default=0.01)
    t.add_argument("--l2", type=float, default=0.0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--init", help="reference system: start from Tessel's initial parameters, STEM.json + STEM.bin "
                                  "(rgnn_parity_export graph=G init_only=1 seed=S), instead of drawing them")
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    t.add_argument("--json")
    q = sub.add_parser("parity", help="check Tessel's first epoch (rgnn_parity_export) against the reference")
    q.add_argument("cases", nargs="+")
    a = ap.parse_args(argv)
    if a.cmd == "parity":
        return parity(a.cases)
    if a.model != "rgcn" and a.hidden % a.heads:
        ap.error("--hidden must be divisible by --heads")
    if a.bias and a.model != "hgt":
        ap.error("--bias is for --model hgt")
    if a.init and a.system != "reference":
        ap.error("--init is for --system reference (PyG's layers have their own parameters)")
    return train(a)


if __name__ == "__main__":
    sys.exit(main())
