# column-sum experiment graphs: one kernel each (siblings over one domain)
out = []
def g(name, params, body, rets):
    out.append("graph %s(%s) {\n%s\n  return %s\n}\n" % (name, ", ".join(params), "\n".join("  " + b for b in body), ", ".join(rets)))
for tag, shape, n in (("fc", "8192,3072", 1), ("fc", "8192,3072", 8), ("ap", "8192,768", 1), ("ap", "8192,768", 8), ("ap", "8192,768", 4), ("qkv", "8192,2304", 8)):
    ps = ["x%d: bf16[%s]" % (i, shape) for i in range(n)]
    body = ["s%d = sum(cast(x%d, dtype=f32), dims=[0])" % (i, i) for i in range(n)]
    g("%s%d" % (tag, n), ps, body, ["s%d" % i for i in range(n)])
for n in (1, 4):
    ps, body, rets = [], [], []
    for i in range(n):
        ps += ["dy%d: f32[8,1024,768]" % i, "xh%d: f32[8,1024,768]" % i]
        body += ["w%d = sum(mul(dy%d, xh%d), dims=[0, 1])" % (i, i, i), "c%d = sum(dy%d, dims=[0, 1])" % (i, i)]
        rets += ["w%d" % i, "c%d" % i]
    g("ln%d" % (2 * n), ps, body, rets)
open("colsum.fg", "w").write("\n".join(out))
