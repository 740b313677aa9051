#!/usr/bin/env bash
# Runs stashpool's loom models (loom-tests/).
#
#   ./loom.sh                      every model, 2 preemptions (CI runs this
#                                  but for the deep pool models, which it
#                                  runs at 3: .ci/run)
#   ./loom.sh sweep_races_owner    the models whose names contain a filter
#                                  (several filters: any of them)
#   ./loom.sh --skip slot          every model but those whose names
#                                  contain `slot` (libtest's --skip)
#   LOOM_MAX_PREEMPTIONS=3 LOOM_ONLY=loom_pool ./loom.sh
#                                  a deeper search of the pool models
#                                  (minutes; LOOM_ONLY picks one test target)
#   DEBUG=1 ./loom.sh NAME         replay-friendly: logs, locations of the
#                                  failing accesses, and a checkpoint file
#                                  (target/loom/NAME.checkpoint) to resume
#                                  or replay a failing interleaving
set -euo pipefail
cd "$(dirname "$0")"

export RUSTFLAGS="${RUSTFLAGS:-} --cfg stashpool_loom"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
# The longest schedule a model may take, in branches (loom's default is
# 1000): a model of a bounded pool that spills, steals and sweeps takes
# more steps than that.
export LOOM_MAX_BRANCHES="${LOOM_MAX_BRANCHES:-2000}"
# The models spend their time in loom's scheduler and our code together:
# built as one unit (fat LTO, one codegen unit) they run markedly faster,
# for a few more seconds of build.
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-fat}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-1}"
filter="${1:-}"
filters=("$@")

# Checkpoints need loom's `checkpoint` feature (serde), which only DEBUG
# builds pay for; cargo runs the models in loom-tests/, hence the absolute
# path.
features=()
if [ -n "${DEBUG:-}" ]; then
    export LOOM_LOG="${LOOM_LOG:-trace}"
    export LOOM_LOCATION=1
    export LOOM_CHECKPOINT_INTERVAL="${LOOM_CHECKPOINT_INTERVAL:-1}"
    export LOOM_CHECKPOINT_FILE="${LOOM_CHECKPOINT_FILE:-$PWD/target/loom/${filter:-all}.checkpoint}"
    export RUST_BACKTRACE=1
    mkdir -p target/loom
    features=(--features loom/checkpoint)
fi

tests=()
if [ -n "${LOOM_ONLY:-}" ]; then
    tests=(--test "$LOOM_ONLY")
fi

# A separate target directory: `--cfg stashpool_loom` rebuilds every dependency.
exec cargo test --release -p stashpool-loom-tests --target-dir target/loom "${features[@]}" "${tests[@]}" -- "${filters[@]}" --test-threads="${LOOM_TEST_THREADS:-2}"
