#!/usr/bin/env python3
"""The cost model (opt/cost.c) against a measured run: every workload of
bench/workloads.py planned by fusec with the run's copy bandwidth
(--knob COST_GBS), its kernels' estimates summed, compared with fusec's
measured device time from the run's bench.json.

  python3 bench/cost_check.py --fusec build/tools/fusec \
      --results docs/bench/2026-11-26-T1.json docs/bench/2026-11-26-V2.json

Prints one line a workload (estimate, measured, ratio) and the
distribution of measured / estimate: a model that ranks schedules needs
the ratio close to 1 and, more, the same across workloads.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

COST = re.compile(r"cost: ([0-9.]+) us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fusec", required=True)
    ap.add_argument("--results", required=True, nargs="+",
                    help="bench.json files of one GPU; a later file's workloads replace an earlier one's "
                         "(a rerun with the current schedule), the first gives the copy bandwidth")
    ap.add_argument("--expect", nargs=2, type=float, metavar=("LO", "HI"),
                    help="exit 1 unless the geometric mean of measured / estimate is within [LO, HI] "
                         "(the test suite's guard against a model change that no run backs)")
    a = ap.parse_args()
    st = json.load(open(a.results[0]))
    for more in a.results[1:]:
        st["workloads"].update(json.load(open(more))["workloads"])
    gbs = int(round(st.get("copy_gbs_used") or 0))
    if gbs <= 0:
        sys.exit("cost_check: the results hold no copy bandwidth")
    ratios = []
    with tempfile.TemporaryDirectory() as d:
        for wl in workloads.W:
            r = st["workloads"].get(wl["name"])
            if not r or not r.get("fusec", {}).get("us"):
                continue
            src = os.path.join(d, wl["name"] + ".fg")
            with open(src, "w") as f:
                f.write(workloads.fg_text(wl))
            p = subprocess.run([a.fusec, src, "--graph", wl["name"], "--emit", "plan", "--knob",
                                "COST_GBS=%d" % gbs, "-o", "-"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            if p.returncode:
                print("%-36s fusec failed: %s" % (wl["name"], p.stderr.strip().splitlines()[0]))
                continue
            est = sum(float(x) for x in COST.findall(p.stdout))
            got = r["fusec"]["us"]
            ratios.append((got / est, wl["name"]))
            print("%-36s est %9.2f us  measured %9.2f us  measured/est %.2f" % (wl["name"], est, got, got / est))
    ratios.sort()
    n = len(ratios)
    g = math.exp(sum(math.log(x) for x, _ in ratios) / n)
    print("\n%d workloads at %d GB/s: measured / estimate geomean %.2f, median %.2f, 10th %.2f, 90th %.2f; "
          "within 25%%: %d" % (n, gbs, g, ratios[n // 2][0], ratios[n // 10][0], ratios[9 * n // 10][0],
                               sum(1 for x, _ in ratios if 0.8 <= x <= 1.25)))
    print("furthest: " + ", ".join("%s %.2f" % (w, x) for x, w in ratios[:3] + ratios[-5:]))
    if a.expect and not a.expect[0] <= g <= a.expect[1]:
        print("cost_check: geomean %.2f outside [%g, %g]" % (g, a.expect[0], a.expect[1]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
