"""The graph files of the RGNN families (bench/README.md "What run.sh does"): imported or generated with
`tessel`, features added with add_features.py, re-made when the tool that wrote them is newer."""
import os
import sys

from harness_env import DATA, PEERS, TESSEL, WORK, log, rel, run_measured

# The synthetic graph: >= 5 M edges (5,249,874 with seed 1: 2.5 M base, as many inverse, 250 k self-loops).
SYNTHETIC = ["--nodes", "250000", "--node-types", "3", "--relations", "50", "--classes", "8",
             "--avg-degree", "20", "--feature-dim", "0", "--seed", "1", "--name", "synthetic"]

# The scale suite (Tessel only; a peer would need hours or more memory than the machine has): the issue's
# 1M-node graph, `tessel generate graph --nodes 1000000 --avg-degree 20 --relations 50 --feature-dim 64`
# (103 relations with inverses and self-loops, 20,999,964 edges), hidden 64, 2 layers, 1 worker, 2 threads,
# and the peak memory each model may use per edge.
SCALE = ["--nodes", "1000000", "--avg-degree", "20", "--relations", "50", "--feature-dim", "64", "--seed", "1",
         "--name", "scale"]


def newer(path: str, *sources: str) -> bool:
    """True when path exists and is at least as new as every existing source."""
    if not os.path.exists(path):
        return False
    t = os.path.getmtime(path)
    return all(t >= os.path.getmtime(s) for s in sources if os.path.exists(s))


def tessel_make(what: list, out: str, errors: list) -> bool:
    """`tessel import ...` or `tessel generate graph ...` into `out`, unless `out` is newer than the binary."""
    if newer(out, TESSEL):
        return True
    if not os.path.exists(TESSEL):
        if os.path.exists(out):
            log(f"warning: {TESSEL} is missing; using the existing {rel(out)} as it is")
            return True
        errors.append(f"{rel(out)}: cannot make it, {rel(TESSEL)} is missing")
        return False
    log(f"writing {rel(out)} with tessel {' '.join(what[:2])}")
    code, out_text, err, _ = run_measured([TESSEL] + what + ["--out", out], 1800)
    if code != 0:
        errors.append(f"tessel {' '.join(what[:2])} exited {code}: {(err or out_text).strip()[-400:]}")
        return False
    return True


def add_features(src: str, out: str, args: list, errors: list) -> bool:
    script = os.path.join(PEERS, "add_features.py")
    if newer(out, src, script):
        return True
    log(f"writing {rel(out)} (add_features.py {' '.join(args)})")
    code, _, err, _ = run_measured([sys.executable, script, src, out] + args, 900)
    if code != 0:
        errors.append(f"add_features.py {rel(out)} exited {code}: {err.strip()[-400:]}")
        return False
    return True


def prepare_graphs(cases: list, sizes: list, acceptance: bool, errors: list) -> dict:
    """Makes (or reuses) the graph files, re-made when the tessel binary (or add_features.py) is newer:
      aifb.h5        tessel import rdf (one-hot: the acceptance case);
      fb15k.h5       tessel import edges --add-inverse --add-self-loop;
      fb15k-feat.h5  + add_features.py: 64 random features, 16 random classes, 10% train / 10% test;
      synthetic.h5   tessel generate graph (SYNTHETIC), labels from the generator, no features;
      scale.h5       tessel generate graph (SCALE): the scale suite's 1M-node graph, with its own features;
      CASE-fSIZE.h5  the matrix's inputs: the case's file with random features of width SIZE and its
                     labels kept (add_features.py --keep-labels); fb15k-f64.h5 is fb15k-feat.h5 itself.
    Returns {(case, size): path} for the matrix, size None for the acceptance files."""
    os.makedirs(WORK, exist_ok=True)
    graphs = {}
    base = {}
    if "aifb" in cases:
        aifb = os.path.join(WORK, "aifb.h5")
        if tessel_make(["import", "rdf", "--triples", os.path.join(DATA, "aifb", "aifb_stripped.nt.gz"),
                        "--train-labels", os.path.join(DATA, "aifb", "trainingSet.tsv"),
                        "--test-labels", os.path.join(DATA, "aifb", "testSet.tsv")], aifb, errors):
            base["aifb"] = aifb
            if acceptance:
                graphs[("aifb", None)] = aifb
    if "fb15k" in cases:
        fb = os.path.join(WORK, "fb15k.h5")
        fb_feat = os.path.join(WORK, "fb15k-feat.h5")
        if tessel_make(["import", "edges", "--input", os.path.join(DATA, "fb15k-237", "FB15k-237.tar.gz"),
                        "--add-inverse", "--add-self-loop"], fb, errors) and \
                add_features(fb, fb_feat, ["--dim", "64", "--classes", "16", "--train", "0.1", "--test", "0.1",
                                           "--seed", "0"], errors):
            base["fb15k"] = fb_feat
            if acceptance:
                graphs[("fb15k", None)] = fb_feat
    if "synthetic" in cases:
        syn = os.path.join(WORK, "synthetic.h5")
        if tessel_make(["generate", "graph"] + SYNTHETIC, syn, errors):
            base["synthetic"] = syn
    if "scale" in cases:
        scale = os.path.join(WORK, "scale.h5")
        if tessel_make(["generate", "graph"] + SCALE, scale, errors):
            graphs[("scale", 64)] = scale
    for case, src in base.items():
        for size in sizes:
            if case == "fb15k" and size == 64:
                graphs[(case, size)] = src
                continue
            out = os.path.join(WORK, f"{case}-f{size}.h5")
            if add_features(src, out, ["--keep-labels", "--dim", str(size), "--seed", "0"], errors):
                graphs[(case, size)] = out
    return graphs


def fingerprint(path: str) -> str:
    import h5py
    with h5py.File(path, "r") as f:
        v = f["meta"].attrs.get("source_fingerprint", b"")
    v = v.decode() if isinstance(v, bytes) else str(v)
    # "tessel-import-rdf v1; triples=...; ...;add_features(...)" -> "tessel-import-rdf v1 + add_features(...)"
    parts = [p.strip() for p in v.split(";")]
    return " + ".join([parts[0]] + [p for p in parts[1:] if p.startswith("add_features")])
