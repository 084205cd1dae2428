#!/usr/bin/env bash
# Tests of the Karmada resource interpreter customizations
# (resourceinterpretercustomizations.yaml): every luaScript run with Debian's
# lua5.1 against the cases in testdata/ and compared with their hand-written
# expected output. One line per case; exits non-zero on any failure.
#
#   deploy/karmada/test.sh
#
# Needs lua5.1 and python3 with PyYAML (Debian: lua5.1 python3-yaml); $LUA
# names another Lua 5.1 interpreter. testlib/run.py reads the YAML, passes
# the objects to the scripts and checks the results; testlib/vm.lua runs one
# hook in an environment like Karmada's gopher-lua VM.
set -euo pipefail
cd "$(dirname "$0")"

lua=${LUA:-lua5.1}
if ! command -v "$lua" >/dev/null; then
    echo "deploy/karmada/test.sh: $lua not found: install Debian's lua5.1 (apt-get install lua5.1)" >&2
    exit 1
fi
if ! "$lua" -e 'assert(_VERSION == "Lua 5.1", _VERSION)' 2>/dev/null; then
    echo "deploy/karmada/test.sh: $lua is not Lua 5.1 (Karmada's gopher-lua is Lua 5.1)" >&2
    exit 1
fi
# python3 on PATH may be another build than Debian's (pyenv): the first with PyYAML.
python=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import yaml' 2>/dev/null; then python=$p; break; fi
done
if [[ -z $python ]]; then
    echo "deploy/karmada/test.sh: no python3 with PyYAML: install Debian's python3-yaml (apt-get install python3-yaml)" >&2
    exit 1
fi
exec "$python" testlib/run.py "$lua"
