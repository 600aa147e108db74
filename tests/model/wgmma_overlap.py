#!/usr/bin/env python3
"""A numpy model of the overlapped wgmma attention loop (knob ATTN_OVERLAP=1;
backend_ptx/emit_attention.c, wg_overlap_loop and wg_block_top), run by
hand: python3 this.py.

Mirrors, for one CTA's query rows, the order of the kernel: the prologue's
loads (Q and blocks 0 .. ahead - 1, ahead = stages - 2), block 0's S and
softmax, then for each key block j >= 1 the top (cp.async wait, barrier,
block j + ahead into stage (j + ahead) % stages), S_j from stage j %
stages, O *= alpha_{j-1}, O += P_{j-1} V_{j-1} from stage (j - 1) %
stages, the masks and softmax of block j, P_j packed (rounded to bf16);
after the loop O = O alpha_last + P_last V_last. The shared stages are
arrays that a load overwrites, so a stage reloaded while a block still
reads it gives wrong results, and the model asserts that no load targets
a stage whose V is still to be read (block j - 1's in iteration j). Compares o and lse with a double
reference (causal top-left aligned; key lengths with tails).
"""
import numpy as np

rng = np.random.default_rng(2)


def bf16(x):
    """round to bfloat16 (nearest even), back to f32"""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def run(Sq, Sk, D, bc, br, stages, causal, q0):
    q = rng.standard_normal((Sq, D)).astype(np.float32)
    k = rng.standard_normal((Sk, D)).astype(np.float32)
    v = rng.standard_normal((Sk, D)).astype(np.float32)
    scale2 = np.float32(1 / np.sqrt(D) * 1.4426950408889634)
    rows = np.arange(q0, q0 + br)
    kend = min(q0 + br, Sk) if causal else Sk
    nkb = (kend + bc - 1) // bc
    ahead = stages - 2
    smem_k = np.full((stages, bc, D), np.nan, np.float32)
    smem_v = np.full((stages, bc, D), np.nan, np.float32)
    reading_v = {}  # stage -> block whose V is still to be read (from its S to its P V's end)

    def load(blk):
        st = blk % stages
        assert reading_v.get(st) is None, f"stage {st} reloaded while block {reading_v[st]}'s V is read"
        kk = np.zeros((bc, D), np.float32)
        vv = np.zeros((bc, D), np.float32)
        n = max(0, min(bc, Sk - blk * bc))
        kk[:n], vv[:n] = k[blk * bc:blk * bc + n], v[blk * bc:blk * bc + n]
        smem_k[st], smem_v[st] = kk, vv

    qt = np.zeros((br, D), np.float32)
    nq = max(0, min(br, Sq - q0))
    qt[:nq] = q[q0:q0 + nq]
    for sg in range(ahead):
        if sg < nkb:
            load(sg)

    m = np.full(br, -np.inf, np.float32)
    l = np.zeros(br, np.float32)
    o = np.zeros((br, D), np.float32)

    def top(j):
        if j + ahead < nkb:
            load(j + ahead)
        return j % stages

    def softmax(j, s):
        nonlocal m, l
        keys = j * bc + np.arange(bc)
        ok = (keys[None, :] < Sk) & np.ones((br, 1), bool)
        if causal:
            ok &= keys[None, :] <= rows[:, None]
        s = np.where(ok, s, -np.inf).astype(np.float32)
        mx = s.max(1) * scale2
        mnew = np.maximum(m, mx)
        muse = np.where(mnew == -np.inf, 0, mnew).astype(np.float32)
        alpha = np.exp2(m - muse).astype(np.float32)
        p = np.exp2(s * scale2 - muse[:, None]).astype(np.float32)
        l = (l * alpha + p.sum(1)).astype(np.float32)
        m = mnew
        return alpha, bf16(p)

    cur = top(0)
    _, p_prev = softmax(0, qt @ smem_k[cur].T)
    reading_v[cur] = 0
    alpha_prev = None
    for j in range(1, nkb):
        cur = top(j)
        prev = (j - 1) % stages
        s = qt @ smem_k[cur].T                                    # S_j issued
        reading_v[cur] = j
        if alpha_prev is not None:
            o = o * alpha_prev[:, None]                           # O *= alpha_{j-1}
        pv = p_prev @ bf16(smem_v[prev])                          # P V issued
        alpha, p = softmax(j, s)                                  # wait 1, softmax
        o = (o + pv).astype(np.float32)                           # wait 0
        reading_v[prev] = None
        p_prev, alpha_prev = p, alpha
    if alpha_prev is not None:
        o = o * alpha_prev[:, None]
    o = o + p_prev @ bf16(smem_v[(nkb - 1) % stages])
    out = o / l[:, None]
    lse = m * np.log(2) + np.log(l)

    # double reference
    s = q[q0:q0 + nq].astype(np.float64) @ k.T.astype(np.float64) / np.sqrt(D)
    if causal:
        s = np.where(np.arange(Sk)[None, :] <= rows[:nq, None], s, -np.inf)
    ref_lse = np.log(np.exp(s - s.max(1, keepdims=True)).sum(1)) + s.max(1)
    ref = np.exp(s - ref_lse[:, None]) @ v.astype(np.float64)
    err = np.linalg.norm(out[:nq] - ref) / np.linalg.norm(ref)
    lerr = np.abs(lse[:nq] - ref_lse).max()
    assert err < 1e-2 and lerr < 1e-4, (Sq, Sk, D, bc, stages, causal, q0, err, lerr)
    return err, nkb


worst = 0.0
n = 0
for D in (64, 128):
    for bc in (64, 128):
        for stages in (3,):
            for causal in (False, True):
                for Sq, Sk in ((77, 77), (333, 333), (200, 300), (300, 200), (128, 1024), (1, 129)):
                    for q0 in range(0, Sq, 128):
                        err, nkb = run(Sq, Sk, D, bc, 128, stages, causal, q0)
                        worst = max(worst, err)
                        n += 1
print(f"wgmma_overlap: {n} CTAs (up to key blocks of 3 stages each), o rel L2 <= {worst:.2e}: ok")
