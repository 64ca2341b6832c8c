#!/usr/bin/env bash
# Whose checkpoints are whose (issue 32 rows 4, 6, 13), on small embedded GPT runs:
# - a checkpoint.dir belongs to one job: a second job there (at once, or later, or its --resume) is exit 2,
#   and the first job's checkpoints stay;
# - --resume refuses a checkpoint written with other settings (exit 2 naming the key, old and new value),
#   unless --resume-force, which warns;
# - a refused resume leaves nothing new on disk, in a new or in the earlier run directory;
# - a checkpoint set aside by a resume (step-K.refused) is pruned once the resumed run passes it;
# - a link planted at a step directory is exit 6 naming it, and nothing is written through it.
source "$(dirname "$0")/../lib.sh"
w=$TESSEL_WORK
gpt=(jobs/examples/gpt-demo.toml --set model.layers=1 --set model.hidden=32 --set model.heads=2
     --set model.context=32 --set data.generated_bytes=16384 --set train.batch_size=4 --set train.warmup_steps=1
     --set train.val_every=0 --set train.val_batches=1 --set train.log_every=100 --set metrics.port_base=0
     --set resources.threads_per_worker=1 --set checkpoint.every_steps=4 --set checkpoint.keep=2)
tree() { (cd "$w" && find . -path ./stdout -prune -o -path ./stderr -prune -o -print | sort; cat "$@" 2>/dev/null | md5sum); }

# --- two jobs, one checkpoint.dir, at once: one of them has it, the other is refused before training
"$TESSEL" run "${gpt[@]}" --set job.name=alpha --set train.steps=20 --set checkpoint.dir="$w/shared" \
  --set job.output_dir="$w/alpha" > "$w/alpha.log" 2>&1 & a=$!
"$TESSEL" run "${gpt[@]}" --set job.name=beta --set train.steps=12 --set checkpoint.dir="$w/shared" \
  --set job.output_dir="$w/beta" > "$w/beta.log" 2>&1 & b=$!
set +e; wait $a; ea=$?; wait $b; eb=$?; set -e
owner=$(cat "$w/shared/job" 2>/dev/null || true)
case "$ea,$eb,$owner" in
  0,2,alpha) loser=beta ;;
  2,0,beta) loser=alpha ;;
  *) cat "$w/alpha.log" "$w/beta.log"; fail "two jobs in one checkpoint.dir: exits $ea (alpha) and $eb (beta), owner '$owner'" ;;
esac
grep -q "holds the checkpoints of job '$owner'" "$w/$loser.log" || { cat "$w/$loser.log"; fail "the refusal does not name job $owner"; }
[ ! -e "$w/$loser" ] || fail "the refused job left its run directory $w/$loser"
[ "$(ls -d "$w"/shared/step-* | wc -l)" = 2 ] || fail "the owner's 2 checkpoints are not all there: $(ls "$w/shared")"
# The refused job's --resume takes nothing of the owner's.
expect_exit 2 "$TESSEL" run "${gpt[@]}" --set job.name=$loser --set train.steps=24 --set checkpoint.dir="$w/shared" \
  --set job.output_dir="$w/$loser" --resume
expect_stderr "holds the checkpoints of job '$owner'"
pass "two jobs sharing a checkpoint.dir: $loser refused (exit 2), also its --resume; $owner's checkpoints kept"

# --- a resume with other settings is refused naming the key; nothing new on disk; --resume-force warns
"$TESSEL" run "${gpt[@]}" --set train.steps=8 --set job.output_dir="$w/first" > "$w/first.log" 2>&1 \
  || { cat "$w/first.log"; fail "the first run failed"; }
before=$(tree "$w/first/job.toml")
expect_exit 2 "$TESSEL" run "${gpt[@]}" --set train.steps=12 --set train.batch_size=8 --set job.output_dir="$w/first" --resume
expect_stderr "train.batch_size = 4, this job has train.batch_size = 8"
[ "$(tree "$w/first/job.toml")" = "$before" ] || fail "the refused resume changed $w"
expect_exit 2 "$TESSEL" run "${gpt[@]}" --set train.steps=12 --set model.hidden=48 \
  --set checkpoint.dir="$w/first/checkpoints" --set job.output_dir="$w/second" --resume
expect_stderr "model.hidden = 32, this job has model.hidden = 48"
[ "$(tree "$w/first/job.toml")" = "$before" ] || fail "the refused resume into a new run directory left something"
pass "a resume with other settings: exit 2 naming the key; nothing new on disk"
# Forced, a checkpoint of another shape is still refused by the workers, and still leaves nothing new.
expect_exit 2 "$TESSEL" run "${gpt[@]}" --set train.steps=12 --set model.hidden=48 --set job.output_dir="$w/first" --resume-force
expect_stderr "does not fit this job"
[ "$(tree "$w/first/job.toml")" = "$before" ] || { diff <(echo "$before") <(tree "$w/first/job.toml") || true; fail "the refused forced resume changed $w"; }
expect_exit 0 "$TESSEL" run "${gpt[@]}" --set train.steps=12 --set train.lr=1e-3 --set job.output_dir="$w/first" --resume-force
expect_stderr "resume-force: resuming .*step-8 although it was written with train.lr = 0.002 and this job has 0.001"
pass "--resume-force resumes another lr with a warning; a checkpoint of another shape is still refused, leaving nothing"

# --- a damaged newest checkpoint is set aside, and pruned once the resumed run has passed its step
"$TESSEL" run "${gpt[@]}" --set train.steps=8 --set job.output_dir="$w/damaged" > "$w/damaged.log" 2>&1 \
  || { cat "$w/damaged.log"; fail "the run to damage failed"; }
printf x >> "$w/damaged/checkpoints/step-8/worker-0.h5"
expect_exit 0 "$TESSEL" run "${gpt[@]}" --set train.steps=16 --set job.output_dir="$w/damaged" --resume
expect_stderr "set aside .*step-8"
left=$(cd "$w/damaged/checkpoints" && ls -d step-* | tr '\n' ' ')
[ "$left" = "step-12 step-16 " ] || fail "after the resume, the checkpoints are: $left (expected step-12 step-16)"
pass "a set-aside step-8.refused is pruned by the keep rule once superseded: $left"

# --- a link planted at the next step directory: exit 6 naming it, nothing written through it
# (a checkpoint.dir of its own: a run directory holding checkpoints/ already holds an earlier run)
mkdir -p "$w/planted/checkpoints" "$w/elsewhere"
ln -s "$w/elsewhere" "$w/planted/checkpoints/step-4"
expect_exit 6 "$TESSEL" run "${gpt[@]}" --set train.steps=8 --set job.output_dir="$w/planted-run" \
  --set checkpoint.dir="$w/planted/checkpoints"
expect_stderr "planted/checkpoints/step-4"
[ -z "$(ls -A "$w/elsewhere")" ] || fail "a shard was written through the planted link: $(ls "$w/elsewhere")"
pass "a link planted at a checkpoint step directory: exit 6 naming it, nothing written through it"
