"""The RGCN peers in PyTorch, as the original entry point of the RGCN benchmark (kept for its command line),
and the hand-written `compact` reference layer.

  python rgcn_torch.py --graph G.h5 --variant rgcn|fast|compact [--threads 2] [--hidden 64] [--layers 2]
                       [--epochs 20] [--warmup 1] [--max-seconds S] [--lr 0.01] [--l2 5e-4] [--seed 0]
                       [--json OUT]

is `rgnn_peer.py --model rgcn` with `--system pyg --variant RGCNConv` (rgcn), `--system pyg --variant
FastRGCNConv` (fast) or `--system torch --variant compact` (compact); every other option is passed on.
See rgnn_peer.py for the timing, the result JSON and the exit codes.

`compact` is not a library: it is the same model written directly in PyTorch the way Tessel computes it
(Hector's compact materialization: W_r applied once per unique (relation, source) pair, then a sparse mean
aggregation), a reference for what eager PyTorch on the same BLAS can do.
"""
import sys
import warnings

from rgnn_peer import blas_info, cap_memory  # noqa: F401 - re-exported for older callers

VARIANTS = {"rgcn": ["--system", "pyg", "--variant", "RGCNConv"],
            "fast": ["--system", "pyg", "--variant", "FastRGCNConv"],
            "compact": ["--system", "torch", "--variant", "compact"]}


def CompactRgcnLayer(torch, g, d_in: int, d_out: int, onehot: bool):
    """One RGCN layer computed as Tessel computes it: gather the unique (relation, source) rows, one GEMM
    per relation on its rows (a row gather of W for a one-hot input), then out = A @ messages with the
    sparse [N, pairs] matrix A holding 1/|N_r(i)|. Same parameter shape and initialisation as PyG's
    RGCNConv ([R, d_in, d_out], glorot); rgnn_peer.py copies the same seeded weights into every variant."""
    import numpy as np

    # Unique (relation, src) pairs, grouped by relation because etype is.
    key = g.etype * g.num_nodes + g.src
    pair_key, edge_pair = np.unique(key, return_inverse=True)
    pair_rel = pair_key // g.num_nodes
    pair_src = pair_key % g.num_nodes
    pair_ptr = np.searchsorted(pair_rel, np.arange(g.num_relations + 1))
    deg_key = g.etype * g.num_nodes + g.dst
    _, deg_inv, deg_count = np.unique(deg_key, return_inverse=True, return_counts=True)
    norm = (1.0 / deg_count[deg_inv]).astype(np.float32)
    # A[dst, pair] = sum of 1/|N_r(dst)| over the edges. Forward is A @ M and backward A^T @ G, each one
    # CSR sparse-dense product (torch's own backward for a CSR product transposes A every call).
    with torch.sparse.check_sparse_tensor_invariants(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coo = torch.sparse_coo_tensor(torch.from_numpy(np.stack([g.dst, edge_pair])), torch.from_numpy(norm),
                                      (g.num_nodes, pair_key.size)).coalesce()
        adj = coo.to_sparse_csr()
        adj_t = coo.t().coalesce().to_sparse_csr()

    class Aggregate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, msg):
            return adj @ msg

        @staticmethod
        def backward(ctx, grad):
            return adj_t @ grad

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # The caller copies the seeded glorot weights in (rgnn_peer.build_torch).
            self.weight = torch.nn.Parameter(torch.zeros(g.num_relations, d_in, d_out))
            self.register_buffer("pair_src", torch.from_numpy(pair_src))
            self.register_buffer("row", torch.from_numpy(pair_rel * d_in + pair_src) if onehot else None)
            self.sizes = np.diff(pair_ptr).tolist()

        def forward(self, h):
            if onehot:
                msg = torch.nn.functional.embedding(self.row, self.weight.view(-1, d_out))
            else:
                # split/unbind, not slicing: the backward of a slice or of weight[r] allocates and zero-fills
                # a gradient of the whole tensor, once per relation.
                parts = torch.split(h.index_select(0, self.pair_src), self.sizes)
                msg = torch.cat([p @ w for p, w in zip(parts, self.weight.unbind(0))])
            return Aggregate.apply(msg)

    return Layer()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = []
    variant = None
    i = 0
    while i < len(argv):
        if argv[i] == "--variant" and i + 1 < len(argv):
            variant = argv[i + 1]
            i += 2
            continue
        if argv[i].startswith("--variant="):
            variant = argv[i].split("=", 1)[1]
            i += 1
            continue
        out.append(argv[i])
        i += 1
    if variant not in VARIANTS:
        print("rgcn_torch.py: --variant rgcn|fast|compact is required (see --help of rgnn_peer.py)",
              file=sys.stderr)
        return 2
    import rgnn_peer
    return rgnn_peer.main(["--model", "rgcn"] + VARIANTS[variant] + out)


if __name__ == "__main__":
    sys.exit(main())
