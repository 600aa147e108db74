"""Regions written at each call's sizes (the backend; issue 18).

fusec's code generator takes one symbolic size, the leading dim. A graph
Dynamo traces with a dynamic sequence length has it as dim 1 ([B, T, C]),
often beside a dynamic batch and their products ([B*T, C] around a
matmul): such a region cannot be one symbolic artifact. Rather than leave
its nodes to PyTorch, the backend writes it at the sizes of each call:

- when the graph is compiled, the region's sizes give equations, one per
  symbolic dim of a tensor input and per symbolic scalar input (`expr =
  the call's value`); every symbol the region's sizes use must follow from
  them, solving one equation with one unknown at a time (Unsolvable
  otherwise: the region stays in PyTorch, as before, with the reason);
- at a call, the input shapes (and scalar inputs) are the key; for a key
  not seen yet the equations are solved and checked against every input,
  the mapping rows' checks are made again at those sizes (the rows that
  need static shapes took the region at the example's sizes: attention's
  head dim, a grouped head count), and the region is written with those
  sizes (sizes.bound), static, compiled or fetched through the backend's
  cache as any region (a machine without fusec records it in
  $FUSEC_BACKEND_PENDING) and loaded; the key then maps to that call.
  Where no artifact can be had (not in the cache, fusec refused it), the
  equations do not hold or a row refuses the sizes, the key maps to the
  region's own PyTorch code (the partitioner's submodule), so a step never
  fails for want of an artifact.

A call of a known key costs the key (the input shapes read) and a dict
lookup over the call of a static region. Each key is a compilation (or a
cache entry), so this suits a few sizes (bucketed sequence lengths); the
count is in Stats.shapes.
"""
import threading

from . import export as _export


class Unsolvable(Exception):
    pass


def _tensor(v):
    return hasattr(v, "dtype") and hasattr(v, "shape")


def equations(params):
    """[(parameter index, dim or None for a scalar, sympy expr)] of a
    region's symbolic input sizes."""
    eqs = []
    for i, p in enumerate(params):
        v = p.meta.get("val") if hasattr(p, "meta") else None
        if _tensor(v):
            eqs += [(i, d, s.node.expr) for d, s in enumerate(v.shape) if not isinstance(s, int)]
        elif hasattr(v, "node") and hasattr(v.node, "expr"):
            eqs.append((i, None, v.node.expr))
    return eqs


def symbols(values):
    """The sympy symbols of the sizes (and strides) of FX nodes' values."""
    out = set()
    for n in values:
        for t in _export._tensors(n.meta.get("val")):
            for s in list(t.shape) + list(t.stride()):
                if not isinstance(s, int):
                    out |= s.node.expr.free_symbols
    return out


def check_solvable(eqs, needed):
    """Raises Unsolvable unless every symbol of `needed` follows from the
    equations, one unknown at a time."""
    known = set()
    left = list(eqs)
    while True:
        step = [e for e in left if len(e[2].free_symbols - known) == 1]
        if not step:
            break
        for e in step:
            known |= e[2].free_symbols
        left = [e for e in left if e[2].free_symbols - known]
    lost = needed - known
    if lost:
        raise Unsolvable("the sizes %s do not follow from the region's input sizes" % ", ".join(
            sorted(map(str, lost))))


def solve(eqs, args, needed):
    """{symbol: Integer} from a call's arguments; Unsolvable where an
    equation has no single non-negative integer solution or does not hold."""
    import sympy

    env = {}
    left = []
    for i, d, e in eqs:
        a = args[i]
        left.append((e, int(a.shape[d]) if d is not None else int(a)))
    while left:
        rest = []
        for e, val in left:
            e2 = e.xreplace(env)
            free = e2.free_symbols
            if not free:
                if int(e2) != val:
                    raise Unsolvable("%s is %s at this call, not %d" % (e, e2, val))
                continue
            if len(free) > 1:
                rest.append((e, val))
                continue
            sym = next(iter(free))
            if e2 == sym:
                sol = [sympy.Integer(val)]
            else:
                try:
                    sol = [x for x in sympy.solve(sympy.Eq(e2, val), sym) if x.is_integer and x >= 0]
                except Exception as ex:  # torch's sympy functions sympy cannot invert
                    raise Unsolvable("%s = %d: %s" % (e, val, ex))
            if len(sol) != 1:
                raise Unsolvable("%s = %d has %d non-negative integer solutions" % (e, val, len(sol)))
            env[sym] = sympy.Integer(sol[0])
        if len(rest) == len(left):
            break
        left = rest
    lost = needed - set(env)
    if lost:
        raise Unsolvable("no value for %s" % ", ".join(sorted(map(str, lost))))
    return env


class Specialized:
    """The call of a region written at each call's sizes. `fallback` runs
    the region's nodes in PyTorch; `load(ptx, region)` makes the call of a
    compiled artifact (the backend's loader or fgrun call); `compile(region)`
    is (artifact path or None, why), the backend's compile_region of it."""

    def __init__(self, r, syms, fallback, load, compile, stats, log, layouts=False):
        self.r, self.syms, self.fallback, self.load, self.compile = r, syms, fallback, load, compile
        self.layouts = layouts  # emit_region's: the backend's FUSEC_BACKEND_LAYOUTS
        self.stats, self.log = stats, log
        ph, body, outs = r.parts
        self.eqs = equations(ph)
        self.needed = symbols(list(ph) + list(body) + list(outs)) | {
            x for _, _, e in self.eqs for x in e.free_symbols}
        check_solvable(self.eqs, self.needed)
        key_args = sorted({i for i, _, _ in self.eqs})
        self.tensor_key = [i for i in key_args if _tensor(ph[i].meta.get("val"))]
        self.scalar_key = [i for i in key_args if i not in self.tensor_key]
        self.calls = {}  # key -> the call for those sizes
        self.lock = threading.Lock()

    def key(self, args):
        return tuple([args[i].shape for i in self.tensor_key] + [args[i] for i in self.scalar_key])

    def __call__(self, *args):
        k = self.key(args)
        call = self.calls.get(k)
        if call is None:
            with self.lock:
                call = self.calls.get(k) or self._make(k, args)
        return call(*args)

    def _make(self, k, args):
        import copy

        ph, body, outs = self.r.parts
        n = len(self.calls)
        try:
            env = solve(self.eqs, args, self.needed)
            gname = "%s_s%d" % (self.r.gname, n)
            with _export.bound(env):
                judge = _export.Support(compiled_only=True, specialize=True)
                for node in body:  # the rows' checks at these sizes (attention's head dims, ...)
                    ok, why, _ = judge._judge(node)
                    if not ok:
                        raise Unsolvable("%s at these sizes: %s" % (node.name, why))
                # the inputs in the dim orders (and windows) the trace had
                # them, as a static region's (partition's layouts="covers"),
                # so that they are passed as they are, not copied
                lay = {}
                text, _ = _export.emit_region(gname, ph, body, outs, self.syms, canonical=True,
                                              layouts=self.layouts, layout_out=lay)
                orders = [_export._dim_order(o.meta["val"]) for o in outs]
        except Exception as ex:  # a size no row or equation takes; a bug here must not stop the step either
            why = getattr(ex, "why", None) or str(ex)
            if not isinstance(ex, (Unsolvable, _export.Unbound, _export.Refuse, KeyError)):
                why = "internal error writing it (%s: %s); please report it" % (type(ex).__name__, ex)
            self.log.warning("fusec.backend: region %s at sizes %s stays in PyTorch: %s", self.r.name, k, why)
            self.calls[k] = self.fallback
            return self.fallback
        r = copy.copy(self.r)
        r.gname, r.fg, r.note = gname, text, None
        _export.set_layouts(r, ph, outs, lay)
        r.out_orders = orders
        missing = self.stats.missing
        ptx, why = self.compile(r)
        self.stats.shapes += 1
        if ptx is None:
            self.log.warning("fusec.backend: region %s at sizes %s stays in PyTorch; %s:\n%s", self.r.name, k,
                             "fusec refused it" if self.stats.missing == missing else "missing", why)
            call = self.fallback
        else:
            call = self.load(ptx, r)
        self.calls[k] = call
        return call
