#!/usr/bin/env python3
"""Every workload of bench/workloads.py with its leading dim symbolic, against
static compiles at the same sizes (issue 18: "every workload ... compiled with
its leading (token or batch) dims symbolic, facts declared as a user would
(range, %8 where it holds), runs within 5% of its static compile at the
benchmark shape, and within 5% of a static compile at three other sizes each
(including one that is not a multiple of 8 and one below 512 rows)").

How a workload is made symbolic: its leading size v is dim 0 of its first
parameter; dim 0 of the parameters whose dim 0 is v becomes T. Where that is
ambiguous (a [4096] weight beside [4096, 4096] activations) every choice is
tried, most symbolic first, and the first that fusec compiles is kept: a wrong
choice does not type-check (T is not proven equal to 4096). Two symbolic
compiles: `<T: 1..R %8>` (run at the sizes that are multiples of 8) and
`<T: 1..R>` (run at the odd size), R = max(65536, 2 v). Static compiles of the
same graph at each size. A workload fusec cannot compile symbolically is
listed with fusec's message: that is a gap of issue 18, not a skip.

Sizes: v, v/2 (rounded down to 8), 384 (below 512 rows) and an odd size near
v/3. Attention workloads are left out (the attention kernel has no symbolic
form yet).

  symbolic_suite.py prepare --fusec F --out D [--only A,B]   (build machine) writes
      D/NAME.fg and D/NAME.ptx (static graphs NAME_s<SIZE>, symbolic NAME_sym8
      and NAME_sym1) and D/plan.json
  symbolic_suite.py run --fgrun F --dir D [--n N] [--only A,B] [--jobs J] [--check]
      (GPU machine) times each with `fgrun --bench N` (device time, median),
      prints the table and D/results.json. J fgrun processes (default 8) load
      their artifact and make their inputs at once, but each takes the GPU
      alone (FGRUN_GPU_LOCK, tools/fgrun_gpu.c): no two time kernels
      together; --jobs 1 runs them one after another. --check also checks
      each symbolic graph against the interpreter at its smallest size (the
      CPU interpreter: minutes for the 3-D workloads; `check` below covers
      the issue's sizes, with a limit)
  symbolic_suite.py check --fgrun F --dir D [--jobs J] [--sizes 1,7,63,4097]
      (GPU machine) `fgrun --check` of every workload's symbolic artifact
      without a divisor (NAME_sym1) against the interpreter at each size (the
      issue's 1, 7, 63 and 4097); a size whose largest tensor passes
      CHECK_MAX_ELEMENTS is listed as skipped (the CPU interpreter's time), not
      passed; writes D/check.json
"""
import itertools
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

HEADER = re.compile(r"^graph\s+(\w+)\s*\((.*?)\)\s*\{", re.S | re.M)
PARAM = re.compile(r"(\w+)\s*:\s*(\w+)\s*\[([^\]]*)\]")


def first_graph(text):
    """The workload's graph (the text holds one)."""
    m = HEADER.search(text)
    if not m:
        raise ValueError("no graph header")
    return m


def params_of(sig):
    out = []
    for m in PARAM.finditer(sig):
        dims = [d.strip() for d in m.group(3).split(",") if d.strip()]
        out.append((m.group(1), m.group(2), dims, m.span(3)))
    return out


def with_sig(text, m, name, clause, sig):
    return text[: m.start()] + "graph %s%s(%s) {" % (name, clause, sig) + text[m.end():]


def sig_with(sig, params, chosen, value):
    """sig with dim 0 of the chosen parameters replaced by value."""
    pieces, last = [], 0
    for i, (_, _, dims, span) in enumerate(params):
        if i in chosen:
            pieces.append(sig[last:span[0]])
            pieces.append(", ".join([str(value)] + dims[1:]))
            last = span[1]
    pieces.append(sig[last:])
    return "".join(pieces)


def attrs_with_t(text, v):
    """The leading size v written as T in the attributes where a user of
    symbolic sizes writes T: the first entry of a reshape's, broadcast's or
    expand's shape and of a slice's ends (v itself: T; a multiple k*v, a
    reshape that merges T with the dims after it: k*T)."""
    def lead(mm):
        n = int(mm.group(2))
        if n == v:
            return mm.group(1) + "T,"
        return mm.group(1) + "%d*T," % (n // v)
    def entry(mm):
        n = int(mm.group(2))
        return lead(mm) if n % v == 0 and n >= v else mm.group(0)
    out = re.sub(r"(\b(?:shape|ends)=\[)\s*(\d+)\s*,", entry, text)
    # a one-entry shape (flattening to rank 1: [B*T] -> k*T)
    return re.sub(r"(\bshape=\[)\s*(\d+)\s*\]",
                  lambda mm: (lead(mm)[:-1] + "]") if int(mm.group(2)) % v == 0 else mm.group(0), out)


def compile_ok(fusec, fg, ptx):
    p = subprocess.run([fusec, fg, "-o", ptx], capture_output=True, text=True)
    return p.returncode == 0, (p.stderr or p.stdout).strip().splitlines()[:1]


def sizes_for(v):
    half = max(8, (v // 2) // 8 * 8)
    odd = max(3, (v // 3) | 1)
    if odd % 8 == 0:
        odd += 1
    small = 384 if v >= 1024 else max(8, v // 4 // 8 * 8)
    out = [v, half, small, odd]
    seen = []
    for s in out:
        if s not in seen:
            seen.append(s)
    return seen


def prepare(fusec, out, only=None):
    os.makedirs(out, exist_ok=True)
    plan = []
    for wl in workloads.W:
        name = wl["name"]
        if name.startswith("attn") or (only and name not in only):
            continue
        text = workloads.fg_text(wl)
        m = first_graph(text)
        params = params_of(m.group(2))
        lead = [p for p in params if p[2]]
        entry = dict(name=name)
        if not lead or not lead[0][2][0].isdigit():
            entry["refused"] = "no leading static dim"
            plan.append(entry)
            continue
        # the leading size: dim 0 of the first parameter, else of a later
        # one (an embedding's token ids after its vocabulary table)
        vs = []
        for p in lead:
            if p[2][0].isdigit() and int(p[2][0]) not in vs:
                vs.append(int(p[2][0]))
        chosen, why, body_t, v = None, None, text, None
        fg = os.path.join(out, name + ".try.fg")
        for v in vs:
            cand = [i for i, p in enumerate(params) if p[2] and p[2][0] == str(v)]
            R = max(65536, 2 * v)
            # every subset containing the first parameter, largest first
            first = cand[0]
            rest = cand[1:][:6]
            subsets = []
            for k in range(len(rest), -1, -1):
                for c in itertools.combinations(rest, k):
                    subsets.append((first,) + c)
            with_attrs = attrs_with_t(text, v)
            for body in [text] + ([with_attrs] if with_attrs != text else []):
                for c in subsets:
                    sig = sig_with(first_graph(body).group(2), params, set(c), "T")
                    g = with_sig(body, first_graph(body), name + "_sym8", "<T: 1..%d %%8>" % R, sig)
                    with open(fg, "w") as f:
                        f.write(g)
                    ok, msg = compile_ok(fusec, fg, os.path.join(out, name + ".try.ptx"))
                    if ok:
                        chosen, body_t = c, body
                        break
                    # the reason given: the most symbolic try (every candidate
                    # parameter, T written in the attributes) of the first size
                    if why is None or (body is with_attrs and c == subsets[0] and v == vs[0]):
                        why = msg[0] if msg else "fusec failed"
                if chosen is not None:
                    break
            if chosen is not None:
                break
        for f in (fg, os.path.join(out, name + ".try.ptx")):
            if os.path.exists(f):
                os.remove(f)
        if chosen is None:
            entry["refused"] = why
            plan.append(entry)
            print("%-32s refused: %s" % (name, why))
            continue
        sizes = sizes_for(v)
        sig_t = sig_with(m.group(2), params, set(chosen), "T")
        mt = first_graph(body_t)
        graphs = [
            with_sig(body_t, mt, name + "_sym8", "<T: 1..%d %%8>" % R, sig_t),
            with_sig(body_t, mt, name + "_sym1", "<T: 1..%d>" % R, sig_t),
        ]
        for s in sizes:
            # the static graph at size s: the symbolic text with T written as s
            st = with_sig(body_t, mt, "%s_s%d" % (name, s), "", sig_t)
            st = re.sub(r"\b(\d+)\*T\b", lambda mm: str(int(mm.group(1)) * s), st)
            st = re.sub(r"\bT\b", str(s), st)
            graphs.append(st)
        fgpath = os.path.join(out, name + ".fg")
        with open(fgpath, "w") as f:
            f.write("\n".join(graphs))
        ok, msg = compile_ok(fusec, fgpath, os.path.join(out, name + ".ptx"))
        if not ok:
            entry["refused"] = "static or symbolic compile failed: %s" % (msg[0] if msg else "?")
            plan.append(entry)
            print("%-32s %s" % (name, entry["refused"]))
            continue
        entry.update(v=v, sizes=sizes, symbolic=[params[i][0] for i in chosen], attrs=body_t is not text)
        plan.append(entry)
        print("%-32s T = dim 0 of %s; sizes %s" % (name, ",".join(entry["symbolic"]), sizes))
    with open(os.path.join(out, "plan.json"), "w") as f:
        json.dump(plan, f, indent=1)
    n = sum(1 for e in plan if "refused" not in e)
    print("symbolic_suite: %d of %d workloads compile with a symbolic leading dim" % (n, len(plan)))


BENCH = re.compile(r"^bench (\S+): \d+ runs, median ([0-9.]+) us")


def fgrun_bench(fgrun, ptx, graph, dim, n, env=None):
    args = [fgrun, ptx, "--graph", graph, "--bench", str(n), "--seed", "1"]
    if dim:
        args += ["--dim", "T=%d" % dim]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    except subprocess.TimeoutExpired:
        return None, ["timed out"]
    for line in p.stdout.splitlines():
        mm = BENCH.match(line)
        if mm:
            return float(mm.group(2)), None
    return None, (p.stderr or p.stdout).strip().splitlines()[-1:]


def run(fgrun, d, n, only=None, jobs=8, do_check=False):
    import concurrent.futures
    with open(os.path.join(d, "plan.json")) as f:
        plan = json.load(f)
    env = None
    if jobs > 1:
        # fgrun takes the GPU alone under this lock (tools/fgrun_gpu.c):
        # the processes' host work overlaps, their timings never do
        env = dict(os.environ, FGRUN_GPU_LOCK=os.path.join(os.path.abspath(d), "gpu.lock"))
    todo = [e for e in plan if not only or e["name"] in only]
    # every timing of every workload, in the table's order: static then
    # symbolic at each size
    benches = []
    for e in todo:
        if "refused" in e:
            continue
        ptx = os.path.join(d, e["name"] + ".ptx")
        for s in e["sizes"]:
            sym = e["name"] + ("_sym8" if s % 8 == 0 else "_sym1")
            benches.append((ptx, "%s_s%d" % (e["name"], s), None))
            benches.append((ptx, sym, s))
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as ex:
        results = ex.map(lambda b: fgrun_bench(fgrun, b[0], b[1], b[2], n, env), benches)
        rows = []
        for e in todo:
            if "refused" in e:
                rows.append(e)
                continue
            name = e["name"]
            ptx = os.path.join(d, name + ".ptx")
            fg = os.path.join(d, name + ".fg")
            e["times"] = []
            for s in e["sizes"]:
                sym = name + ("_sym8" if s % 8 == 0 else "_sym1")
                st, err1 = next(results)
                sy, err2 = next(results)
                e["times"].append(dict(size=s, graph=sym, static_us=st, symbolic_us=sy, error=err1 or err2))
                r = "%.3f" % (sy / st) if st and sy else "-"
                print("%-30s T=%-6d static %8s us  %s %8s us  ratio %s %s" %
                      (name, s, "%.2f" % st if st else "-", sym[-5:], "%.2f" % sy if sy else "-", r,
                       " ".join(err1 or err2 or [])), flush=True)
            if do_check:
                # correctness of the symbolic artifact at a small size
                small = min(e["sizes"])
                sym = name + ("_sym8" if small % 8 == 0 else "_sym1")
                p = subprocess.run([fgrun, ptx, "--graph", sym, "--dim", "T=%d" % small, "--check", fg,
                                    "--seed", "2"], capture_output=True, text=True, timeout=600)
                e["check"] = "pass" if p.returncode == 0 else \
                    "FAIL: " + " ".join((p.stdout + p.stderr).strip().splitlines()[-2:])
                print("%-30s check %s at T=%d: %s" % (name, sym, small, e["check"]), flush=True)
            rows.append(e)
    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    ratios = [t["symbolic_us"] / t["static_us"] for e in rows for t in e.get("times", [])
              if t["static_us"] and t["symbolic_us"]]
    within = sum(1 for r in ratios if r <= 1.05)
    print("symbolic_suite: %d measurements, %d within 5%% of static; worst %.3f" %
          (len(ratios), within, max(ratios) if ratios else 0))
    print("refused: %s" % ", ".join(e["name"] for e in rows if "refused" in e))


# The CPU interpreter takes about 0.1 us an element of each intermediate:
# above this many elements in the largest tensor a check takes minutes.
CHECK_MAX_ELEMENTS = 1 << 28


def elements_at(fg_text, graph, size):
    """Elements of the largest parameter of `graph` at T = size."""
    m = re.search(r"^graph\s+%s\s*(<[^>]*>)?\s*\((.*?)\)\s*\{" % re.escape(graph), fg_text, re.S | re.M)
    if not m:
        return None
    most = 0
    for _, _, dims, _ in params_of(m.group(2)):
        n = 1
        for d in dims:
            n *= size if d == "T" else int(d) if d.isdigit() else 1
        most = max(most, n)
    return most


def check(fgrun, d, sizes, jobs):
    import concurrent.futures
    with open(os.path.join(d, "plan.json")) as f:
        plan = json.load(f)
    todo, rows = [], []
    for e in plan:
        if "refused" in e:
            continue
        name = e["name"]
        fg = os.path.join(d, name + ".fg")
        with open(fg) as f:
            text = f.read()
        for s in sizes:
            n = elements_at(text, name + "_sym1", s)
            if n is None:
                rows.append(dict(name=name, size=s, result="FAIL: no graph %s_sym1" % name))
            elif n > CHECK_MAX_ELEMENTS:
                rows.append(dict(name=name, size=s, result="skipped: %d elements" % n))
            else:
                todo.append((name, s, fg))

    def one(job):
        name, s, fg = job
        cmd = [fgrun, os.path.join(d, name + ".ptx"), "--graph", name + "_sym1", "--dim", "T=%d" % s,
               "--check", fg, "--seed", str(s)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            ok, out = p.returncode == 0, p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            ok, out = False, "timed out"
        last = " ".join(out.strip().splitlines()[-2:])
        return dict(name=name, size=s, result="pass" if ok else "FAIL: " + last)

    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for r in ex.map(one, todo):
            rows.append(r)
            print("%-34s T=%-5d %s" % (r["name"], r["size"], r["result"]), flush=True)
    for r in rows:
        if r["result"].startswith("skipped"):
            print("%-34s T=%-5d %s" % (r["name"], r["size"], r["result"]))
    with open(os.path.join(d, "check.json"), "w") as f:
        json.dump(rows, f, indent=1)
    n = lambda k: sum(1 for r in rows if r["result"].startswith(k))
    print("symbolic_suite check: %d passed, %d failed, %d skipped (sizes %s, %d workloads)" %
          (n("pass"), n("FAIL"), n("skipped"), ",".join(map(str, sizes)), len({r["name"] for r in rows})))
    return 1 if n("FAIL") else 0


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] == "prepare":
        only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
        prepare(argv[argv.index("--fusec") + 1], argv[argv.index("--out") + 1], only)
        return 0
    if argv[0] == "run":
        n = int(argv[argv.index("--n") + 1]) if "--n" in argv else 50
        only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
        jobs = int(argv[argv.index("--jobs") + 1]) if "--jobs" in argv else 8
        run(argv[argv.index("--fgrun") + 1], argv[argv.index("--dir") + 1], n, only, jobs,
            "--check" in argv)
        return 0
    if argv[0] == "check":
        sizes = [int(x) for x in argv[argv.index("--sizes") + 1].split(",")] if "--sizes" in argv else [1, 7, 63, 4097]
        jobs = int(argv[argv.index("--jobs") + 1]) if "--jobs" in argv else 8
        return check(argv[argv.index("--fgrun") + 1], argv[argv.index("--dir") + 1], sizes, jobs)
    print("unknown command %s" % argv[0], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
