"""GPT benchmarks (bench/run.sh llm | peers-llm).

llm        Tessel's GPT-2 on tiny Shakespeare (jobs/examples/gpt-shakespeare.toml: 4 blocks, width 256, 4
           heads, context 256, batches of 8 sequences = 2,048 tokens, about 46 GFLOP a step) for 1, 2 and 3
           pipeline stages (4 micro-batches of 2 sequences with more than one stage): median step time,
           tokens per second, achieved GFLOP/s and its fraction of the sgemm limit measured in the same run
           (tessel-bench-limits at the same threads). Then the stage planner on a 12-block model for 2 and
           3 stages: each stage's predicted time per micro-batch (`tessel plan`'s calibration) against the
           time the stage measured (its forward and backward compute, waits excluded). Then the
           saved-activation policies (--policies, default keep,offload,recompute,auto: [spill] policy for
           every block, spilling to [spill] dir), 1 stage, all the cores: median step time, tokens per
           second, the executor's peak_resident_activation_bytes, the saved bytes a token and the spill
           traffic, on the tiny-Shakespeare model
           ("small", 12 steps, 6 with --quick) and on a 12-block, width-768, 12-head model at context 256
           with micro-batches of 8 sequences ("large": 1.2 GB of saved activations a step under keep;
           6 steps, the median of the last 4; left out with --quick unless --policy-models names it).
peers-llm  the same model, checkpoint, token file, batches and threads in PyTorch (bench/peers/gpt_peer.py,
           written from the same equations; F.scaled_dot_product_attention, fused AdamW, with and without
           torch.compile), side by side with Tessel (1 stage, 2 threads), from one llm.c checkpoint; the
           ratio is Tessel's step time over PyTorch's best. Three interleaved rounds (one with --quick),
           each system's figure the median of its rounds. The losses must agree: every step's loss of
           each PyTorch variant within PEER_LOSS_TOLERANCE (relative) of Tessel's, else the run fails
           (exit 1, saying which step and by how much), as it does when Tessel or every peer fails.

Steps: 12 (6 with --quick); the median leaves out the first 2. Threads: the machine's cores for one
stage; with S stages on C cores, max(1, C // S) per stage. Prints tables and writes JSON rows
(--json, default build/bench/results/FAMILY.json).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
TESSEL = os.path.join(BUILD, "bin", "tessel")
JOB = os.path.join(ROOT, "jobs", "examples", "gpt-shakespeare.toml")
TEXT = os.path.join(os.path.dirname(ROOT), "shared", "data", "tinyshakespeare", "input.txt")
PEER = os.path.join(ROOT, "bench", "peers", "gpt_peer.py")
PYTHON = os.path.join(BUILD, "bench-venv", "bin", "python")
MPI = ["mpirun", "--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none"]
if os.geteuid() == 0:
    MPI.append("--allow-run-as-root")
# peers-llm: the largest relative difference allowed between Tessel's and a PyTorch peer's loss at any
# step. Both run the same function from the same checkpoint in float32 and agree to about 1e-7
# (bench/README.md); rounding over 12 AdamW steps stays far below 1e-4, a real difference does not.
PEER_LOSS_TOLERANCE = 1e-4


def sgemm_limit(threads):
    out = subprocess.run([os.path.join(BUILD, "bin", "tessel-bench-limits"), "--threads", str(threads)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["sgemm"]["gflops"]


def run_tessel(out, stages, threads, steps, extra, layers=4, skip=2):
    shutil.rmtree(out, ignore_errors=True)  # scratch: a run into an earlier run's directory is refused
    workers = stages
    sets = {"resources.workers": workers, "resources.threads_per_worker": threads, "pipeline.stages": stages,
            "pipeline.microbatches": 1 if stages == 1 else 4, "train.steps": steps, "train.warmup_steps": 2,
            "train.val_every": 0, "train.val_batches": 1, "data.val_fraction": 0.05, "model.layers": layers,
            "job.output_dir": out, "job.name": "bench-llm", "train.log_every": 1000}
    sets.update(extra)
    cmd = [TESSEL, "run", JOB]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    if workers > 1:
        cmd = MPI + ["--enable-recovery", "-np", str(workers + 1)] + cmd
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0 or not os.path.exists(os.path.join(out, "summary.json")):
        tail = (p.stderr.strip().splitlines() or [""])[-1]
        return {"error": f"exit {p.returncode}: {tail}"}
    s = json.load(open(os.path.join(out, "summary.json")))
    secs = s["step_seconds"][skip:] or s["step_seconds"]
    step = statistics.median(secs)
    return {"step_seconds": step, "tokens_per_second": s["tokens_per_step"] / step,
            "gflops": s["flops_per_step"] / step / 1e9, "losses": s["step_loss"], "summary": s}


# The policy rows' models: name -> (job overrides, steps, steps left out of the median).
POLICY_MODELS = {
    "small": ({}, None, 2),
    "large": ({"model.layers": 12, "model.hidden": 768, "model.heads": 12, "model.context": 256,
               "train.batch_size": 12, "train.warmup_steps": 1}, 6, 2),
}


def policies(a, rows, cores):
    work = os.path.join(BUILD, "bench", "llm")
    names = [p for p in a.policies.split(",") if p]
    models = [m for m in (a.policy_models or ("small" if a.quick else "small,large")).split(",") if m]
    print(f"\nsaved-activation policies, 1 stage, {cores} threads")
    print(f"{'model':>6} {'policy':>10} {'step ms':>9} {'tokens/s':>9} {'peak act. MB':>12} {'B/token/block':>13}"
          f" {'save-all B':>10}  loss step 1 -> last")
    for model in models:
        extra, steps, skip = POLICY_MODELS[model]
        steps = steps or (6 if a.quick else 12)
        layers = extra.get("model.layers", 4)
        ref = None
        for policy in names:
            r = run_tessel(os.path.join(work, f"policy_{model}_{policy}"), 1, cores, steps,
                           dict(extra, **{"spill.policy": policy}), layers=layers, skip=skip)
            case = f"policy_{model}_{policy}"
            if "error" in r:
                print(f"{model:>6} {policy:>10}  {r['error']}")
                rows.append({"bench": "llm", "case": case, "metric": "step_seconds", "value": None, "unit": "s",
                             "status": "error", "error": r["error"]})
                continue
            s = r["summary"]
            peak = s["peak_resident_activation_bytes"]
            per_token = s["saved_activation_bytes_per_token"]
            mean_per_token = sum(per_token) / len(per_token)
            same = ""
            if ref is None:
                ref = r
            else:
                same = "  (losses = " + ("keep's, bit for bit)" if r["losses"] == ref["losses"] else "differ!)")
            spill = s.get("spill") or {}
            io = (f"  spill {spill['written_bytes'] / len(r['losses']) / 1e6:.0f} MB/step out, "
                  f"{spill['read_bytes'] / len(r['losses']) / 1e6:.0f} in, waited {spill['wait_seconds']:.2f} s"
                  if spill else "")
            print(f"{model:>6} {policy:>10} {1e3 * r['step_seconds']:>9.1f} {r['tokens_per_second']:>9.0f} "
                  f"{peak / 1e6:>12.1f} {mean_per_token:>13.0f} {s['saved_activation_bytes_per_token_save_everything']:>10}"
                  f"  {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}{same}{io}")
            common = {"bench": "llm", "case": case, "model": model, "policy": policy, "threads_per_worker": cores,
                      "steps": steps, "layers": layers}
            base = {} if r is ref else {"baseline": ref["step_seconds"], "ratio": r["step_seconds"] / ref["step_seconds"]}
            rows.append(dict(common, metric="step_seconds", value=r["step_seconds"], unit="s", **base))
            rows.append(dict(common, metric="tokens_per_second", value=r["tokens_per_second"], unit="tokens/s"))
            base = {} if r is ref else {"baseline": ref["summary"]["peak_resident_activation_bytes"],
                                        "ratio": peak / ref["summary"]["peak_resident_activation_bytes"]}
            rows.append(dict(common, metric="peak_resident_activation_bytes", value=peak, unit="B", **base))
            if r is ref:
                # Per layer type, kept (after Tempo) against what autograd saves, bytes a token and block.
                for layer, (kept, everything) in s.get("saved_activation_bytes_per_token_by_layer", {}).items():
                    print(f"{'':>6} {'':>10}   {layer:<18} {kept:>8.0f} B/token kept, {everything:>8.0f} saved by autograd"
                          f" ({kept / everything:.2f})")
                    rows.append(dict(common, metric="saved_activation_bytes_per_token_by_layer", layer=layer,
                                     value=kept, unit="B/token/block", baseline=everything, ratio=kept / everything))
            rows.append(dict(common, metric="saved_activation_bytes_per_token", value=mean_per_token,
                             unit="B/token/block", keep_all=s["saved_activation_bytes_per_token_keep_all"],
                             baseline=s["saved_activation_bytes_per_token_save_everything"],
                             ratio=mean_per_token / s["saved_activation_bytes_per_token_save_everything"]))
            spill = s.get("spill")
            if spill:
                steps_run = len(s["step_loss"])
                rows.append(dict(common, metric="spill_written_bytes_per_step", value=spill["written_bytes"] / steps_run,
                                 unit="B"))
                rows.append(dict(common, metric="spill_read_bytes_per_step", value=spill["read_bytes"] / steps_run,
                                 unit="B"))
                rows.append(dict(common, metric="spill_wait_seconds_per_step", value=spill["wait_seconds"] / steps_run,
                                 unit="s"))
                offloaded = s.get("pipeline", {}).get("offload_blocks_per_stage")
                if offloaded is not None:
                    rows.append(dict(common, metric="offloaded_blocks", value=sum(offloaded), unit="blocks"))
            if r is not ref:
                rows.append(dict(common, metric="losses_equal_to_first_policy",
                                 value=1 if r["losses"] == ref["losses"] else 0, unit="bool"))


def llm(a, rows, limit, cores):
    steps = 6 if a.quick else 12
    work = os.path.join(BUILD, "bench", "llm")
    sections = set(a.sections.split(","))
    print(f"sgemm limit: {limit:.1f} GFLOP/s ({cores} threads, tessel-bench-limits)")
    if "stages" in sections:
        print(f"{'stages':>6} {'threads':>7} {'step ms':>8} {'tokens/s':>9} {'GFLOP/s':>8} {'of limit':>8}  "
              "loss step 1 -> last")
    for stages in (1, 2, 3) if "stages" in sections else ():
        threads = cores if stages == 1 else max(1, cores // stages)
        r = run_tessel(os.path.join(work, f"s{stages}"), stages, threads, steps, {})
        row = {"bench": "llm", "case": f"stages_{stages}", "stages": stages, "threads_per_worker": threads}
        if "error" in r:
            print(f"{stages:>6} {threads:>7}  {r['error']}")
            rows.append(dict(row, metric="step_seconds", value=None, unit="s", status="error", error=r["error"]))
            continue
        frac = r["gflops"] / limit
        print(f"{stages:>6} {threads:>7} {1e3 * r['step_seconds']:>8.1f} {r['tokens_per_second']:>9.0f} "
              f"{r['gflops']:>8.1f} {100 * frac:>7.1f}%  {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}")
        rows.append(dict(row, metric="step_seconds", value=r["step_seconds"], unit="s"))
        rows.append(dict(row, metric="tokens_per_second", value=r["tokens_per_second"], unit="tokens/s"))
        rows.append(dict(row, metric="gflops", value=r["gflops"], unit="GFLOP/s", baseline=limit,
                         fraction_of_limit=frac))
    # The planner: predicted against measured, per stage, on a 12-block model.
    if "planner" in sections:
        print("\nstage planner, 12 blocks: predicted vs measured forward + backward per micro-batch (ms)")
        print(f"{'stages':>6} {'stage':>5} {'blocks':>6} {'predicted':>9} {'measured':>9} {'error':>7}")
    for stages in (2, 3) if "planner" in sections else ():
        threads = max(1, cores // stages)
        r = run_tessel(os.path.join(work, f"plan{stages}"), stages, threads, 6 if a.quick else 8, {}, layers=12)
        if "error" in r:
            print(f"{stages:>6}  {r['error']}")
            rows.append({"bench": "llm", "case": f"planner_{stages}_stages", "metric": "stage_seconds", "value": None,
                         "unit": "s", "status": "error", "error": r["error"]})
            continue
        s = r["summary"]
        predicted = s["pipeline"]["predicted_stage_seconds_per_microbatch"]
        blocks = s["pipeline"]["blocks_per_stage"]
        measured = s["stage_compute_seconds_per_microbatch"]
        for i, (p, m) in enumerate(zip(predicted, measured)):
            err = (p - m) / m
            print(f"{stages:>6} {i:>5} {int(blocks[i]):>6} {1e3 * p:>9.1f} {1e3 * m:>9.1f} {100 * err:>6.1f}%")
            rows.append({"bench": "llm", "case": f"planner_{stages}_stages_stage_{i}", "metric": "stage_seconds",
                         "value": m, "unit": "s", "baseline": p, "ratio": m / p, "relative_error": err,
                         "threads_per_worker": threads, "blocks": blocks[i]})
    if "policies" in sections:
        policies(a, rows, cores)


def loss_difference(losses, peer_losses):
    """The largest relative difference between two runs' losses at the same step (inf when their step
    counts differ)."""
    if len(losses) != len(peer_losses):
        return float("inf")
    return max((abs(x - y) / abs(y) for x, y in zip(losses, peer_losses)), default=float("inf"))


def loss_mismatch(losses, peer_losses, peer):
    """Why Tessel's losses and a peer's disagree beyond PEER_LOSS_TOLERANCE, or None when they agree."""
    if len(losses) != len(peer_losses):
        return f"Tessel ran {len(losses)} steps and {peer} {len(peer_losses)}: the losses cannot be compared"
    for step, (x, y) in enumerate(zip(losses, peer_losses), 1):
        if not abs(x - y) <= PEER_LOSS_TOLERANCE * abs(y):
            return (f"Tessel's loss differs from {peer}'s at step {step}: {x:.7f} against {y:.7f}, "
                    f"{abs(x - y) / abs(y):.2e} relative, more than the tolerance {PEER_LOSS_TOLERANCE:.0e}")
    return None


def peers(a, rows, limit, cores):
    steps = 6 if a.quick else 12
    work = os.path.join(BUILD, "bench", "peers-llm")
    os.makedirs(work, exist_ok=True)
    ck, tok = os.path.join(work, "init.bin"), os.path.join(work, "tokens.bin")
    subprocess.run([PYTHON, PEER, "make-checkpoint", "--layers", "4", "--width", "256", "--heads", "4", "--context",
                    "256", "--vocab", "256", "--seed", "1", ck], check=True, capture_output=True)
    subprocess.run([PYTHON, PEER, "make-tokens", TEXT, tok], check=True, capture_output=True)
    hyper = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 1.0,
             "warmup_steps": 2, "final_lr_fraction": 0.1}
    # Interleaved rounds (Tessel, PyTorch eager, PyTorch compiled, then again), each system's figure the
    # median of its rounds: the host's load drifts by 10-30% within minutes, and this way it falls on
    # every system alike.
    rounds = 1 if a.quick else 3
    samples = {"tessel": [], "pytorch": [], "pytorch-compile": []}
    results = {}
    for rnd in range(rounds):
        t = run_tessel(os.path.join(work, f"tessel{rnd}"), 1, cores, steps,
                       {"data.format": "llmc", "data.train_tokens": tok, "model.init_from": ck,
                        **{f"train.{k}": v for k, v in hyper.items() if k != "warmup_steps"}})
        if "error" in t:
            results["tessel"] = t
        else:
            samples["tessel"].append(t["step_seconds"])
            results["tessel"] = dict(t, step_seconds=statistics.median(samples["tessel"]))
        for variant, flags in (("pytorch", []), ("pytorch-compile", ["--compile"])):
            out = os.path.join(work, f"{variant}.json")
            cmd = [PYTHON, PEER, "train", "--checkpoint", ck, "--tokens", tok, "--batch", "8", "--seq", "256",
                   "--steps", str(steps), "--threads", str(cores), "--json", out] + flags
            for k, v in hyper.items():
                cmd += [f"--{k.replace('_', '-')}", str(v)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                results[variant] = {"error": f"exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1]}"}
                continue
            j = json.load(open(out))
            samples[variant].append(statistics.median([x / 1e3 for x in j["step_ms"]][2:]))
            results[variant] = {"step_seconds": statistics.median(samples[variant]), "losses": j["losses"],
                                "blas": j.get("blas")}
    t = results["tessel"]
    print("rounds (median step ms): " + "; ".join(
        f"{n} " + ", ".join(f"{1e3 * x:.1f}" for x in v) for n, v in samples.items()))
    flops = t["summary"]["flops_per_step"] if "summary" in t else None
    print(f"sgemm limit: {limit:.1f} GFLOP/s ({cores} threads)")
    print(f"{'system':>16} {'step ms':>8} {'GFLOP/s':>8} {'of limit':>8} {'loss at step N':>15}")
    for name, r in results.items():
        if "error" in r:
            print(f"{name:>16}  {r['error']}")
            continue
        g = flops / r["step_seconds"] / 1e9 if flops else 0
        print(f"{name:>16} {1e3 * r['step_seconds']:>8.1f} {g:>8.1f} {100 * g / limit:>7.1f}% {r['losses'][-1]:>15.6f}")
    ran = [(r["step_seconds"], n) for n, r in results.items() if n != "tessel" and "error" not in r]
    case = {"bench": "peers-llm", "case": "gpt2_l4_c256_t256_b8"}
    if "error" in t or not ran:
        why = f"Tessel failed: {t['error']}" if "error" in t else "no PyTorch peer ran (is torch installed?)"
        print(f"llm_bench: peers-llm compared nothing: {why}", file=sys.stderr)
        rows.append(dict(case, metric="step_seconds", value=None, unit="s", status="error", error=why))
    else:
        peer_best = min(ran)
        ratio = t["step_seconds"] / peer_best[0]
        worst = loss_difference(t["losses"], results[peer_best[1]]["losses"])
        print(f"Tessel / {peer_best[1]} step time: {ratio:.3f} (target <= 0.95); losses agree to {worst:.2e} relative")
        rows.append(dict(case, metric="step_seconds",
                         value=t["step_seconds"], unit="s", baseline=peer_best[0], ratio=ratio,
                         rounds=samples,
                         peer=peer_best[1], threads=cores,
                         loss_max_relative_difference=worst if worst != float("inf") else None,
                         loss_tolerance=PEER_LOSS_TOLERANCE,
                         gflops=flops / t["step_seconds"] / 1e9, fraction_of_limit=flops / t["step_seconds"] / 1e9 / limit))
        for _, name in ran:
            why = loss_mismatch(t["losses"], results[name]["losses"], name)
            if why:
                print(f"llm_bench: {why}", file=sys.stderr)
                diff = loss_difference(t["losses"], results[name]["losses"])
                rows.append(dict(case, metric="loss_max_relative_difference",
                                 value=diff if diff != float("inf") else None, unit="ratio",
                                 peer=name, loss_tolerance=PEER_LOSS_TOLERANCE, status="error", error=why))
    for name, r in results.items():
        if name != "tessel" and "error" not in r:
            rows.append({"bench": "peers-llm", "case": "gpt2_l4_c256_t256_b8", "metric": f"{name}_step_seconds",
                         "value": r["step_seconds"], "unit": "s", "blas": r.get("blas")})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("family", choices=["llm", "peers-llm"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--sections", default="stages,planner,policies",
                    help="llm: subset of stages,planner,policies")
    ap.add_argument("--policies", default="keep,offload,recompute,auto",
                    help="llm: spill.policy values of the policy rows, the first the baseline")
    ap.add_argument("--policy-models", help="llm: subset of small,large (default both; small with --quick)")
    a = ap.parse_args(argv)
    unknown = set(a.sections.split(",")) - {"stages", "planner", "policies"}
    unknown |= set((a.policy_models or "small").split(",")) - set(POLICY_MODELS)
    if unknown:
        ap.error(f"unknown section or policy model: {', '.join(sorted(unknown))}")
    if not os.path.exists(TEXT):
        print(f"llm_bench: {TEXT} is missing (the shared tiny Shakespeare)", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    limit = sgemm_limit(cores)
    rows = []
    (llm if a.family == "llm" else peers)(a, rows, limit, cores)
    for r in rows:
        r.setdefault("sgemm_limit_gflops", limit)
    out = a.json or os.path.join(BUILD, "bench", "results", f"{a.family}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {out}")
    return 1 if any(r.get("status") == "error" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
