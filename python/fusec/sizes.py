"""Sizes of traced values as ints, without adding guards.

A graph Dynamo traces with dynamic sizes holds SymInts. int() of one, or a
comparison, adds a guard to Dynamo's shape environment: the graph then
holds only at that value and is compiled again at every other. What fusec's
partitioner and mapping rows need of a symbolic size is read here instead:
the value the trace recorded (its hint), or under `bound(env)` the value at
a call's sizes (fusec.specialize, which writes a region at each call's
sizes).
"""
import threading

_BOUND = threading.local()  # .env: the sizes bound() gives the symbols, or None


class bound:
    """`with bound(env):` every size hint() reads is evaluated with the
    symbols of `env` ({sympy symbol: sympy Integer}) in place of the
    example's values: a region written at a call's sizes (fusec.specialize).
    A size with a symbol env lacks is an error (Unbound)."""

    def __init__(self, env):
        self.env = env

    def __enter__(self):
        self.old = getattr(_BOUND, "env", None)
        _BOUND.env = self.env

    def __exit__(self, *exc):
        _BOUND.env = self.old


class Unbound(Exception):
    pass


def hint(s):
    """The example's value of a size: an int, a SymInt, or an FX node
    computing one (a view's shape argument `sym_size(x, 0)`); under bound(),
    the size at the bound values. It reads the value the trace recorded,
    never int() of a SymInt, which would add a guard to Dynamo's shape
    environment (the graph then recompiled at every size)."""
    if isinstance(s, int):
        return s
    if "val" in getattr(s, "meta", {}):
        return hint(s.meta["val"])
    env = getattr(_BOUND, "env", None)
    if env is not None and hasattr(s, "node"):
        v = s.node.expr.xreplace(env)
        if not v.is_number:
            raise Unbound("the size %s (%s) at the call's sizes" % (s, v))
        return int(v)
    try:
        return int(s.node.hint) if s.node.hint is not None else int(s.node.shape_env.size_hint(s.node.expr))
    except Exception:
        return int(s)


def ints(xs):
    """Sizes or strides as ints: symbolic ones only under bound() (else
    TypeError: int() of a SymInt would add a guard, hint)."""
    if getattr(_BOUND, "env", None) is not None:
        return [hint(x) for x in xs]
    if not all(isinstance(x, int) for x in xs):
        raise TypeError("symbolic")
    return list(xs)


def shape(t):
    """A traced tensor value's sizes as ints: hint() of each."""
    return [hint(s) for s in t.shape]


def static(*shapes):
    """Whether every size of the shapes is an int (no symbol)."""
    return all(isinstance(d, int) for sh in shapes for d in sh)
