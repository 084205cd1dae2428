#!/usr/bin/env python3
"""The functions a run executed, as a linker symbol ordering file.

    deploy/images/link-order.py CALLGRIND_OUT BINARY > order.txt

CALLGRIND_OUT: `valgrind --tool=callgrind --demangle=no` of BINARY (the
run whose code should sit together); prints the names of BINARY's
functions the run executed that BINARY's symbol table holds, one a line,
in the order callgrind lists them (grouped by source file), for lld's
`--symbol-ordering-file`.
Also prints to stderr how many bytes of code they are, of all of it.
Symbol names hold hashes of the build (profile, toolchain, lockfile): the
file fits the binary it was made from, and one linked the same way.
"""
import os
import re
import subprocess
import sys


def executed(callgrind_out):
    names, objects, order, seen, obj = {}, {}, [], set(), None
    with open(callgrind_out, errors="replace") as f:
        for line in f:
            if line.startswith(("ob=", "cob=")):
                m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.strip())
                if m and m.group(2):
                    objects[m.group(1)] = m.group(2)
                if m and line.startswith("ob="):
                    obj = objects.get(m.group(1))
            elif line.startswith(("fn=", "cfn=")):
                m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
                if not m:
                    continue
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                name = names.get(m.group(1))
                if line.startswith("fn=") and name and name not in seen:
                    seen.add(name)
                    order.append((obj, name))
    return order


def code_sizes(binary):
    out = subprocess.run(
        ["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=True
    ).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split(" ")
        if len(parts) == 4 and parts[2] in "tTwW":
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    callgrind_out, binary = sys.argv[1:]
    sizes = code_sizes(binary)
    binary_path = os.path.realpath(binary)
    ran = [
        name
        for obj, name in executed(callgrind_out)
        if obj and os.path.realpath(obj) == binary_path and name in sizes
    ]
    for name in ran:
        print(name)
    print(
        f"{len(ran)} functions, {sum(sizes[n] for n in ran)} bytes of {sum(sizes.values())} bytes of code",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
