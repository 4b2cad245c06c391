#!/usr/bin/env python3
"""Turns a kernels/cuda (or comm/cuda) .cu file into C++ that g++ compiles against the CUDA
emulator (kernels/emulate/README.md): each launch `k<<<grid, block[, shared[, stream]]>>>(args)`
becomes a call of mlpd_emulate::launch, each `extern __shared__ T name[];` a pointer to the
launch's dynamic shared memory. Nothing else changes, so a compile error points at the .cu line
(a #line directive keeps the file and line numbers).

usage: convert.py IN.cu OUT.cpp
"""
import os
import re
import sys


def matching(text, i, open_ch, close_ch):
    """Index just past the bracket closing the one at text[i]."""
    depth = 0
    j = i
    while j < len(text):
        c = text[j]
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return j + 1
        elif c in "\"'":  # skip a string or char literal
            j += 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
        j += 1
    raise SystemExit("convert.py: unbalanced %s at offset %d" % (open_ch, i))


def split_top_level(s):
    parts, depth, cur = [], 0, ""
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


CALLEE = re.compile(r"([A-Za-z_][\w:]*(?:\s*<[^<>;]*>)?)\s*$")
EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([A-Za-z_][\w:]*)\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?"
    r"([A-Za-z_]\w*)\s*\[\s*\]\s*;")


def convert(text, path):
    out, pos = [], 0
    while True:
        i = text.find("<<<", pos)
        if i < 0:
            out.append(text[pos:])
            break
        m = CALLEE.search(text, pos, i)
        if not m:
            raise SystemExit("%s: a launch without a kernel name near offset %d" % (path, i))
        callee = m.group(1)
        end_cfg = text.find(">>>", i)
        cfg = split_top_level(text[i + 3:end_cfg])
        if not 2 <= len(cfg) <= 4:
            raise SystemExit("%s: a launch needs 2 to 4 configuration values: %s" % (path, cfg))
        j = end_cfg + 3
        while text[j].isspace():
            j += 1
        if text[j] != "(":
            raise SystemExit("%s: a launch without arguments near offset %d" % (path, i))
        k = matching(text, j, "(", ")")
        args = text[j + 1:k - 1]
        shared = cfg[2] if len(cfg) > 2 else "0"
        stream = cfg[3] if len(cfg) > 3 else "nullptr"
        # The arguments are evaluated once, as a launch does; each emulated thread calls the
        # kernel with its own copies.
        call = ("::mlpd_emulate::launch(dim3(%s), dim3(%s), size_t(%s), %s, std::make_tuple(%s), "
                "[](auto&... mlpd_emulate_args) { %s(mlpd_emulate_args...); })"
                % (cfg[0], cfg[1], shared, stream, args, callee))
        # Keep the line count: the launch's newlines go after the call.
        out.append(text[pos:m.start(1)])
        out.append(call + "\n" * (text[m.start(1):k].count("\n") - call.count("\n")))
        pos = k
    text = "".join(out)
    text = EXTERN_SHARED.sub(
        lambda m: "%s* %s = reinterpret_cast<%s*>(::mlpd_emulate::dynamic_shared());" % (m.group(1), m.group(2),
                                                                                          m.group(1)), text)
    text = text.replace("#include <cub/device/device_radix_sort.cuh>", '#include "kernels/emulate/cub_sort.h"')
    return text


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    body = '#line 1 "%s"\n' % src + convert(text, src)
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    with open(dst + ".tmp", "w") as f:
        f.write('#include "kernels/emulate/cuda_emulate.h"\n' + body)
    os.replace(dst + ".tmp", dst)


if __name__ == "__main__":
    main()
