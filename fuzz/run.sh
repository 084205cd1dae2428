#!/usr/bin/env bash
# Fuzz one target (or all, one after the other) with AFL++ for SECONDS each.
#
#   fuzz/run.sh TARGET SECONDS      e.g. fuzz/run.sh query 600
#   fuzz/run.sh all SECONDS
#
# Builds the instrumented targets (cargo afl build --release --features afl),
# then runs `cargo afl fuzz -V SECONDS` from corpus/TARGET with findings in
# $OUT/TARGET (OUT defaults to target/fuzz-out; a later run resumes there).
# Exits non-zero when $OUT/TARGET holds a crash, after copying each one to
# regressions/TARGET/ so that tests/corpus.rs replays it until it is fixed
# (remove $OUT/TARGET once it is). Needs cargo-afl
# (`cargo install cargo-afl --locked`, which also builds AFL++).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
usage() { echo "usage: $0 TARGET|all SECONDS" >&2; exit 2; }
[ $# -eq 2 ] || usage
what=$1 seconds=$2
[[ $seconds =~ ^[0-9]+$ ]] || usage

targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$here/Cargo.toml" | grep -v '^sitegrid-fuzz$')
if [ "$what" = all ]; then
    run=$targets
elif grep -qx "$what" <<<"$targets"; then
    run=$what
else
    echo "unknown target $what; targets: $(echo $targets)" >&2
    exit 2
fi

out=${OUT:-$root/target/fuzz-out}
cd "$root"
# Without the release profile's fat LTO (Cargo.toml): it buys the
# instrumented targets nothing and made each of their links take minutes.
CARGO_PROFILE_RELEASE_LTO=false \
    flock /tmp/sitegrid-cargo.lock cargo afl build --release --features afl -p sitegrid-fuzz --bins

# AFL++ refuses to start on a CPU-frequency governor it does not like, and
# without core_pattern=core it wants to be told crashes may go unnoticed.
export AFL_SKIP_CPUFREQ=1 AFL_NO_UI=1
# A second run continues the first one's queue in $OUT/T.
export AFL_AUTORESUME=1
if [ "$(cat /proc/sys/kernel/core_pattern 2>/dev/null)" != core ]; then
    export AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
fi

found=0
for t in $run; do
    mkdir -p "$out/$t"
    echo "== $t: ${seconds}s, findings in $out/$t"
    # AFL_NO_UI still prints a line per queue entry: keep them in a log.
    cargo afl fuzz -V "$seconds" -i "$here/corpus/$t" -o "$out/$t" "$root/target/release/$t" \
        >"$out/$t.log" 2>&1 || { tail -20 "$out/$t.log" >&2; exit 1; }
    grep -E '^(run_time|execs_done|execs_per_sec|corpus_count|corpus_found|bitmap_cvg|saved_crashes|saved_hangs) ' \
        "$out/$t/default/fuzzer_stats" | tr -s ' ' | paste -sd' '
    crashes=$(find "$out/$t/default/crashes" -type f -name 'id:*' 2>/dev/null || true)
    if [ -n "$crashes" ]; then
        mkdir -p "$here/regressions/$t"
        for c in $crashes; do
            # Named by content: a crash kept from an earlier run is not copied twice.
            cp "$c" "$here/regressions/$t/crash-$(sha1sum <"$c" | cut -c1-12)"
        done
        echo "== $t: $(wc -l <<<"$crashes") crash(es), copied to fuzz/regressions/$t/" >&2
        found=1
    fi
done
exit $found
