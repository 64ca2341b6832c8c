#!/usr/bin/env bash
# Offloading onto a small disk (issue 19): gpt-demo.toml with spill.policy = "offload" and spill.dir on a
# tmpfs of 1, 3, 6 and 16 MB. Each run exits 0 with the losses of spill.policy = "keep", bit for bit, and
# leaves no file behind. The bandwidth probe fits in the free space (at most a quarter of it; not at all
# under 1 MiB), so it never fills the disk itself; a write that finds no space falls back to recomputing
# as jobs/README.md says. 1 MB: too little to measure, the first spill write fails, every block recomputes.
# 3 MB: the first block's slot (2.6 MB) fits and the second's does not: the disk fills mid-step and the
# run falls back there. 6 and 16 MB: every slot fits, nothing falls back.
# Mounting a tmpfs needs root (CI has it); without it the test is skipped.
source "$(dirname "$0")/../lib.sh"

mounts=()
cleanup() { for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || true; done; }
at_exit cleanup

mkdir -p "$TESSEL_WORK/probe"
mount -t tmpfs -o size=1m tmpfs "$TESSEL_WORK/probe" 2>/dev/null || skip "cannot mount a tmpfs (needs root)"
umount "$TESSEL_WORK/probe"

run() {  # run NAME [--set ...]: gpt-demo.toml, 12 steps (4 of warm-up), into $TESSEL_WORK/NAME
  local name=$1; shift
  expect_exit_within 300 0 "$TESSEL" run jobs/examples/gpt-demo.toml --set train.steps=12 --set train.warmup_steps=4 --set metrics.port_base=0 \
    --set "job.output_dir=\"$TESSEL_WORK/$name\"" "$@"
  cp "$TESSEL_WORK/stderr" "$TESSEL_WORK/$name.log"
}

losses() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step_loss"])' "$1/summary.json"; }
fallbacks() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("spill", {}).get("fallbacks", 0))' "$1/summary.json"; }
written() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("spill", {}).get("written_bytes", 0))' "$1/summary.json"; }

run keep
want=$(losses "$TESSEL_WORK/keep")
for mb in 1 3 6 16; do
  dir=$TESSEL_WORK/disk-${mb}mb
  mkdir -p "$dir"
  mount -t tmpfs -o "size=${mb}m,mode=0700" tmpfs "$dir" || fail "cannot mount a ${mb} MB tmpfs"
  mounts+=("$dir")
  run "offload-${mb}mb" --set 'spill.policy="offload"' --set "spill.dir=\"$dir\""
  log=$TESSEL_WORK/offload-${mb}mb.log
  [ "$(losses "$TESSEL_WORK/offload-${mb}mb")" = "$want" ] || fail "${mb} MB: the losses differ from keep's"
  left=$(ls -A "$dir")
  [ -z "$left" ] || fail "${mb} MB: left behind in the spill directory: $left"
  fell_back=$(grep -c "the spill file is full" "$log" || true)
  case $mb in
    1)
      grep -q "too little to measure" "$log" || fail "1 MB: the probe should have found too little space to measure"
      [ "$fell_back" -ge 1 ] || fail "1 MB: no fallback to recomputing was logged" ;;
    3)
      grep -q "writes .* GB/s" "$log" || fail "3 MB: the probe should have measured with less"
      [ "$fell_back" -ge 1 ] || fail "3 MB: no fallback when the disk filled mid-step" ;;
    *)
      [ "$fell_back" -eq 0 ] && [ "$(fallbacks "$TESSEL_WORK/offload-${mb}mb")" = 0 ] ||
        fail "${mb} MB: every slot fits, yet the run fell back"
      # An offload that silently kept its activations would pass everything above: the bytes say it wrote.
      # 12 steps x 2 micro-batches x one 2.6 MB slot per offloaded block, at least.
      bytes=$(written "$TESSEL_WORK/offload-${mb}mb")
      [ "$bytes" -ge $((12 * 2 * 2600000)) ] || fail "${mb} MB: the offloading run wrote $bytes bytes to its spill file" ;;
  esac
  pass "${mb} MB tmpfs: exit 0, keep's losses, $([ "$fell_back" -ge 1 ] && echo "fell back to recomputing" || echo "no fallback"), $(written "$TESSEL_WORK/offload-${mb}mb") bytes spilled, nothing left behind"
done
