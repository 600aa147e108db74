"""Grouped-query attention from repeated key/value heads (the torch.compile
backend's one rewrite of Dynamo's graph, before AOTAutograd).

Llama-style code repeats each key/value head `rep` times before attention
(HF transformers' repeat_kv; examples/models/llama.py):

    k = k[:, :, None].expand(B, Hk, rep, S, D).reshape(B, Hk * rep, S, D)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)

or `k.repeat_interleave(rep, dim=1)`. Query head h then reads key head
h // rep, which is what `enable_gqa=True` means (PyTorch's documentation of
scaled_dot_product_attention). Written that way AOTAutograd saves the
repeated k and v for the backward and sums their gradients over each group
in a kernel of its own; with `enable_gqa=True` it saves k and v as they are,
and fusec's attention kernels read a group's head once and sum dK, dV over
the group themselves (docs/attention.md, GQA). The rewrite gives the
attention node the heads before the repeat and `enable_gqa=True`, and only
where the repeat is exactly one of the forms above, with static shapes; the
values are the same, so nothing else changes.
"""
import operator

import torch
import torch.nn.functional as F

_SDPA = {F.scaled_dot_product_attention, getattr(torch._C._nn, "scaled_dot_product_attention", None)}


def _shape(n):
    """The node's static shape (a tuple of ints), or None."""
    if not isinstance(n, torch.fx.Node):
        return None
    v = n.meta.get("example_value", n.meta.get("val"))
    shape = getattr(v, "shape", None)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(shape)


def _is(n, methods, functions):
    return isinstance(n, torch.fx.Node) and (
        (n.op == "call_method" and n.target in methods) or (n.op == "call_function" and n.target in functions))


def _unsqueezed_at_2(n):
    """x when n is x with a new dim 2 (x[:, :, None], x.unsqueeze(2)), x
    of rank 4; else None."""
    if not isinstance(n, torch.fx.Node) or len(n.args) < 2:
        return None
    x, idx = n.args[0], n.args[1]
    if n.op == "call_function" and n.target is operator.getitem:
        full = slice(None, None, None)
        if not (isinstance(idx, tuple) and len(idx) >= 3 and idx[:3] == (full, full, None)
                and all(i == full or i is Ellipsis for i in idx[3:])):
            return None
    elif _is(n, ("unsqueeze",), (torch.unsqueeze,)):
        if idx != 2 or n.kwargs:
            return None
    else:
        return None
    s = _shape(x)
    return x if s is not None and len(s) == 4 and _shape(n) == s[:2] + (1,) + s[2:] else None


def repeated_heads(n):
    """(x, rep) when node n is x's heads (dim 1) each repeated rep times in
    a row, x of shape [B, Hk, S, D]; else None."""
    out = _shape(n)
    if out is None or len(out) != 4:
        return None
    if _is(n, ("repeat_interleave",), (torch.repeat_interleave,)):
        x = n.args[0]
        reps = n.args[1] if len(n.args) > 1 else n.kwargs.get("repeats")
        dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim")
        s = _shape(x)
        if (not isinstance(reps, int) or dim not in (1, -3) or s is None or len(s) != 4
                or set(n.kwargs) - {"repeats", "dim"} or out != (s[0], s[1] * reps) + s[2:]):
            return None
        return x, reps
    if not _is(n, ("reshape", "view"), (torch.reshape,)):
        return None
    e = n.args[0]
    if not _is(e, ("expand",), ()):
        return None
    x = _unsqueezed_at_2(e.args[0])
    es = _shape(e)
    if x is None or es is None:
        return None
    s = _shape(x)
    if es != s[:2] + (es[2],) + s[2:] or out != (s[0], s[1] * es[2]) + s[2:]:
        return None
    return x, es[2]


def _has_gqa():
    try:
        import inspect

        return "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):  # a builtin without a signature: try it
        try:
            z = torch.zeros(1, 2, 1, 1)
            F.scaled_dot_product_attention(z, z[:, :1], z[:, :1], enable_gqa=True)
            return True
        except TypeError:
            return False


def _only_qkv(n):
    """Whether the attention node has no mask, no dropout and no
    enable_gqa already (its arguments after q, k, v: the first three by
    keyword or place, scale and enable_gqa by keyword only)."""
    names = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    given = dict(zip(names, n.args[3:]))
    given.update(n.kwargs)
    return (len(n.args) <= 6 and set(given) <= set(names) and given.get("attn_mask") is None
            and not given.get("dropout_p") and not given.get("enable_gqa"))


def rewrite(gm):
    """Gives each attention node of gm whose k and v are repeated heads
    (repeated_heads, the same rep) the heads before the repeat and
    enable_gqa=True. Returns the number of nodes rewritten."""
    if not _has_gqa():
        return 0
    done = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in _SDPA or len(n.args) < 3 or not _only_qkv(n):
            continue
        q, k, v = n.args[:3]
        rk, rv, qs = repeated_heads(k), repeated_heads(v), _shape(q)
        if not rk or not rv or rk[1] != rv[1] or rk[1] < 2 or qs is None or _shape(k)[:2] != qs[:2]:
            continue
        n.args = (q, rk[0], rv[0]) + tuple(n.args[3:])
        n.kwargs = {**n.kwargs, "enable_gqa": True}
        done += 1
        for old in dict.fromkeys((k, v)):  # the repeat, where nothing else reads it
            while old is not rk[0] and old is not rv[0] and not old.users:
                nxt = old.args[0]
                gm.graph.erase_node(old)
                old = nxt
    if done:
        gm.recompile()
    return done
