#!/usr/bin/env python3
"""Summarize a row + column kernel's per-CTA timeline.

Usage: trace_report.py TRACE.bin ARTIFACT.ptx

TRACE.bin is temp 0 of the graph as `FG_TRACE_OUT` wrote it (fgrun, after
`--bench`), from an artifact compiled with `fusec --knob TRACE=1`: the last
64 bytes a CTA hold eight u64 %globaltimer readings (ns) by its thread 0 at
start, rows done, partials written, fenced, ticket taken, wait over,
combined, end (docs/architecture.md). Points a CTA did not reach in the last
run (only combiners wait and combine) keep older values and are left out.
Prints, per point, how many CTAs reached it and the min / p10 / median /
p90 / max in microseconds after the first CTA started.
"""
import re
import struct
import sys

POINTS = ["start", "rows done", "partials", "fenced", "ticket", "wait over", "combined", "end"]


def grid_of(ptx_path):
    with open(ptx_path) as f:
        for line in f:
            m = re.match(r"// kernel 0 \S+ grid (\d+) ", line)
            if m:
                return int(m.group(1))
    raise SystemExit(f"{ptx_path}: no '// kernel 0 ... grid' line")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    G = grid_of(sys.argv[2])
    data = open(sys.argv[1], "rb").read()
    if len(data) < 64 * G:
        raise SystemExit(f"{sys.argv[1]}: {len(data)} bytes, fewer than 64 x {G} CTAs")
    tail = data[len(data) - 64 * G:]
    ctas = [struct.unpack_from("<8Q", tail, 64 * i) for i in range(G)]
    t0 = min(c[0] for c in ctas)
    print(f"{sys.argv[1]}: {G} CTAs, microseconds after the first start")
    for p, name in enumerate(POINTS):
        xs = sorted((c[p] - t0) / 1000.0 for c in ctas if t0 <= c[p] < t0 + 10**10)
        if not xs:
            continue
        n = len(xs)
        print(f"  {name:10s} {n:5d} CTAs  min {xs[0]:8.2f}  p10 {xs[n // 10]:8.2f}  "
              f"median {xs[n // 2]:8.2f}  p90 {xs[9 * n // 10]:8.2f}  max {xs[-1]:8.2f}")


if __name__ == "__main__":
    main()
