#!/usr/bin/env bash
# Keep what a campaign found, in the tree: the queue of $OUT/TARGET (the
# inputs AFL++ found new coverage with) and corpus/TARGET, minimised together
# by afl-cmin (the fewest inputs that reach every edge any of them reaches);
# the queue's inputs it keeps go into corpus/TARGET as found-<sha1>, and the
# found-* files it does not keep go. The seeds (hand-written, and gen-* from
# examples/seed.rs) always stay. A later campaign, on any machine, starts from
# there instead of from the seeds alone.
#
#   fuzz/keep.sh TARGET...        e.g. after fuzz/run.sh all 3600: fuzz/keep.sh all
#
# Needs the instrumented build fuzz/run.sh makes (target/release/TARGET).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${OUT:-$root/target/fuzz-out}
(($#)) || { echo "usage: $0 TARGET...|all" >&2; exit 2; }
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$here/Cargo.toml" | grep -v '^sitegrid-fuzz$')
[[ $1 == all ]] && set -- $targets
export AFL_SKIP_CPUFREQ=1 AFL_NO_UI=1
# afl-cmin.bash of the AFL++ cargo-afl built for this rustc: it measures the
# targets as AFL++ runs them (the default afl-cmin, in Python, sees no edge of
# afl.rs's shared-memory targets).
afl=$(ls -d "${XDG_DATA_HOME:-$HOME/.local/share}/afl.rs/rustc-$(rustc -V | cut -d' ' -f2)-"*/afl.rs-*/afl/bin 2>/dev/null | head -1)
[[ -x $afl/afl-cmin.bash ]] || { echo "AFL++ not found: cargo install cargo-afl (fuzz/README.md)" >&2; exit 1; }

for t in "$@"; do
    grep -qx "$t" <<<"$targets" || { echo "unknown target $t" >&2; exit 2; }
    queue=$out/$t/default/queue
    if [[ ! -d $queue ]]; then
        echo "== $t: no queue in $queue, nothing to keep"
        continue
    fi
    [[ -x $root/target/release/$t ]] || { echo "no instrumented $t: run fuzz/run.sh first" >&2; exit 1; }
    work=$(mktemp -d)
    mkdir "$work/in"
    # One name per content: a queue input equal to a seed is the seed.
    for f in "$here/corpus/$t"/* "$queue"/id:*; do
        [[ -f $f ]] || continue
        name=$(basename "$f")
        [[ $name == id:* ]] && name=found-$(sha1sum <"$f" | cut -c1-12)
        cp -n "$f" "$work/in/$name"
    done
    AFL_PATH=$afl PATH=$afl:$PATH "$afl/afl-cmin.bash" -e -i "$work/in" -o "$work/min" -- "$root/target/release/$t" >"$work/cmin.log" 2>&1 ||
        { tail -20 "$work/cmin.log" >&2; rm -rf "$work"; exit 1; }
    before=$(find "$here/corpus/$t" -name 'found-*' | wc -l)
    find "$here/corpus/$t" -name 'found-*' -delete
    for f in "$work/min"/found-*; do
        [[ -f $f ]] && cp "$f" "$here/corpus/$t/"
    done
    after=$(find "$here/corpus/$t" -name 'found-*' | wc -l)
    echo "== $t: $(ls "$queue" | grep -c '^id:') queued, $(ls "$work/min" | wc -l) kept by afl-cmin of $(ls "$work/in" | wc -l); found-* $before -> $after"
    rm -rf "$work"
done
