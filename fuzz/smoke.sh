#!/usr/bin/env bash
# CI's fuzz stage (.ci/run): every target built instrumented and run 5 s, so
# they keep building and their regressions stay fixed (fuzz/README.md).
# Installs cargo-afl (and AFL++ with it) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
# Installing cargo-afl builds AFL++ (gcc, make) into
# ~/.local/share/afl.rs/rustc-<version>-<hash>/; `cargo install` does nothing
# when cargo-afl is there, so after a rustc update AFL++ is rebuilt once here.
cargo install cargo-afl --version 0.18.2 --locked
ls -d "${XDG_DATA_HOME:-$HOME/.local/share}/afl.rs/rustc-$(rustc -V | cut -d' ' -f2)-"*/afl.rs-0.18.2 >/dev/null 2>&1 \
    || cargo afl config --build --force
# Five seconds a target need no optimised build: opt-level 1 without line
# tables, as the instrumented build was most of this stage. Real campaigns
# (fuzz/run.sh by hand) keep the release profile as it is.
OUT=$(mktemp -d) CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=false fuzz/run.sh all 5
echo "fuzz smoke: done in $((SECONDS - started)) s"
