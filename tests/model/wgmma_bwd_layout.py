#!/usr/bin/env python3
"""A numpy model of the wgmma attention backward's operand layouts (issue 19,
backend_ptx/emit_attention_bwd.c with the plan's wgmma; tensor_core.c's
fgb_tc_wg_*), run by hand: python3 this.py. The layout conventions are
tests/model/wgmma_layout.py's (the forward's; CUTLASS's canonical SW128
layouts read through the descriptors), whose helpers are repeated here.

For D 64 and 128, bc 64, br 128 (two warpgroups) and 64, both stages:
1. load_tile's swizzled stores (thread tid, piece u -> sw_off) cover each
   tile once at the 128-byte swizzle's place; lds_sw (delta's reads) reads
   element (row, 8 d + 2 t + c) for the lane's rows.
2. dq kernel: S = Q K^T and dP = dO V^T (Q, dO the warpgroup's rows of the
   [br] tiles, K, V the stage's [bc] tiles, all K-major), dQ += dS K (dS
   the D fragment packed as the A register fragment, K MN-major) equal
   numpy's products.
3. dk, dv kernel: S^T = K Q^T, dP^T = V dO^T (K, V the warpgroup's rows of
   [br], Q, dO [bc] K-major), dV += P^T dO and dK += dS^T Q (dO, Q
   MN-major, lbo bc x 128; a stage 2 bc D 2 + 1024 bytes) likewise.
"""
import numpy as np

rng = np.random.default_rng(2)


def swz(addr):
    return addr ^ (((addr >> 7) & 7) << 4)


def sw_off(rows, r, c):
    """emit_attention_bwd.c sw_off: chunk holding (r, c), c a multiple of 8"""
    ch = c >> 3
    return (ch >> 3) * rows * 128 + r * 128 + (((ch & 7) ^ (r & 7)) * 16)


def load_tile(smem, at, tile, block):
    """load_tile: piece tid + block u of 8 elements: row piece / (D/8), column 8 (piece % (D/8))"""
    rows, D = tile.shape
    per_row = D // 8
    assert rows * per_row % block == 0
    seen = np.zeros(smem.size, bool)
    for u in range(rows * per_row // block):
        for tid in range(block):
            piece = tid + u * block
            r, c = piece // per_row, (piece % per_row) * 8
            addr = at + sw_off(rows, r, c)
            assert addr == swz(at + (c // 64) * rows * 128 + r * 128 + (c % 64) * 2)
            e = addr // 2
            assert not seen[e:e + 8].any()
            seen[e:e + 8] = True
            smem[e:e + 8] = tile[r, c:c + 8]
    assert seen.sum() == rows * D
    return seen


def desc(start, lbo):
    return (start >> 4) & 0x3FFF | (lbo >> 4) << 16 | (1024 >> 4) << 32 | 1 << 62


def undesc(d):
    return (d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4, d >> 62


def read_kmajor(smem, d, rows):
    start, _, sbo, mode = undesc(d)
    assert mode == 1
    r = np.arange(rows)[:, None]
    k = np.arange(16)[None, :]
    return smem[swz(start + (r % 8) * 128 + (r // 8) * sbo + k * 2) // 2]


def read_mnmajor(smem, d, n):
    start, lbo, sbo, mode = undesc(d)
    assert mode == 1
    k = np.arange(16)[:, None]
    c = np.arange(n)[None, :]
    return smem[swz(start + (c % 64) * 2 + (c // 64) * lbo + (k % 8) * 128 + (k // 8) * sbo) // 2]


def wg_ss(smem, adesc, a_rows, bdesc, b_rows, n, D):
    """fgb_tc_wg_ss: A B^T over D / 16 k steps"""
    acc = np.zeros((64, n))
    for kk in range(D // 16):
        ao = ((kk // 4) * a_rows * 128 + (kk % 4) * 32) >> 4
        bo = ((kk // 4) * b_rows * 128 + (kk % 4) * 32) >> 4
        acc += read_kmajor(smem, adesc + ao, 64) @ read_kmajor(smem, bdesc + bo, n).T
    return acc


def pack_as_a(x):
    """x (64 x n) in the m64nN D fragment, packed by pack_a, as the A
    register fragments of the n / 16 k steps (each 64 x 16)"""
    n = x.shape[1]
    out = np.full((n // 16, 64, 16), np.nan)
    for w in range(4):
        for lane in range(32):
            g, t = lane // 4, lane % 4
            d = {(j, 2 * h + c): x[16 * w + g + 8 * h, 8 * j + 2 * t + c]
                 for j in range(n // 8) for h in range(2) for c in range(2)}
            for j in range(n // 16):
                halves = [d[(2 * j, i)] for i in range(4)] + [d[(2 * j + 1, i)] for i in range(4)]
                for e in range(8):  # a0..a7: (row g + 8 ((e/2)%2), col 2t + e%2 + 8 (e/4))
                    r, c = 16 * w + g + 8 * ((e // 2) % 2), 2 * t + (e % 2) + 8 * (e // 4)
                    assert np.isnan(out[j, r, c])
                    out[j, r, c] = halves[e]
    return out


def wg_rs(smem, pa, bdesc, D):
    """fgb_tc_wg_rs: sum over k steps j of pa[j] B_j, B_j 2048 j bytes on"""
    acc = np.zeros((64, D))
    for j in range(pa.shape[0]):
        acc += pa[j] @ read_mnmajor(smem, bdesc + ((j * 2048) >> 4), D)
    return acc


def close(x, ref):
    return np.allclose(x, ref, rtol=1e-9, atol=1e-9)


def check_dq(D, bc, br):
    block = 2 * br
    base = 1024 * 5
    q_at, do_at, k_at = 0, br * D * 2, 2 * br * D * 2
    v_at = k_at + bc * D * 2
    stage = 2 * bc * D * 2
    smem = np.zeros((base + k_at + 2 * stage) // 2)
    Q, dO, O = (rng.standard_normal((br, D)) for _ in range(3))
    load_tile(smem, base + q_at, Q, block)
    load_tile(smem, base + do_at, dO, block)
    load_tile(smem, base + k_at, O, block)  # O in stage 0's place (2 bc >= br)
    # lds_sw: this lane's (rt, 8 d + 2 t + c), rt % 8 = g
    for warp in range(br // 16):
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for r in range(2):
                rt = warp * 16 + g + 8 * r
                for d in range(D // 8):
                    for c in range(2):
                        off = rt * 128 + ((g ^ (d % 8)) * 16) + (2 * t + c) * 2 + (d // 8) * br * 128
                        assert smem[(base + k_at + off) // 2] == O[rt, 8 * d + 2 * t + c]
    for cur in (0, stage):
        K, V = rng.standard_normal((bc, D)), rng.standard_normal((bc, D))
        load_tile(smem, base + cur + k_at, K, block)
        load_tile(smem, base + cur + v_at, V, block)
        for wg in range(br // 64):
            rows = slice(64 * wg, 64 * wg + 64)
            S = wg_ss(smem, desc(base + q_at + 64 * wg * 128, 16), br,
                      desc(base + k_at, 16) + (cur >> 4), bc, bc, D)
            assert close(S, Q[rows] @ K.T)
            dP = wg_ss(smem, desc(base + do_at + 64 * wg * 128, 16), br,
                       desc(base + v_at, 16) + (cur >> 4), bc, bc, D)
            assert close(dP, dO[rows] @ V.T)
            dS = rng.standard_normal((64, bc))
            dQ = wg_rs(smem, pack_as_a(dS), desc(base + k_at, bc * 128) + (cur >> 4), D)
            assert close(dQ, dS @ K)


def check_dkdv(D, bc, br):
    block = 2 * br
    base = 1024 * 3
    k_at, v_at, q_at = 0, br * D * 2, 2 * br * D * 2
    do_at = q_at + bc * D * 2
    stage = 2 * bc * D * 2 + 1024
    assert stage % 1024 == 0
    smem = np.zeros((base + q_at + 2 * stage) // 2)
    K, V = rng.standard_normal((br, D)), rng.standard_normal((br, D))
    load_tile(smem, base + k_at, K, block)
    load_tile(smem, base + v_at, V, block)
    for cur in (0, stage):
        Q, dO = rng.standard_normal((bc, D)), rng.standard_normal((bc, D))
        load_tile(smem, base + cur + q_at, Q, block)
        load_tile(smem, base + cur + do_at, dO, block)
        for wg in range(br // 64):
            rows = slice(64 * wg, 64 * wg + 64)
            ST = wg_ss(smem, desc(base + k_at + 64 * wg * 128, 16), br,
                       desc(base + q_at, 16) + (cur >> 4), bc, bc, D)
            assert close(ST, K[rows] @ Q.T)
            dPT = wg_ss(smem, desc(base + v_at + 64 * wg * 128, 16), br,
                        desc(base + do_at, 16) + (cur >> 4), bc, bc, D)
            assert close(dPT, V[rows] @ dO.T)
            PT, dST = rng.standard_normal((64, bc)), rng.standard_normal((64, bc))
            dV = wg_rs(smem, pack_as_a(PT), desc(base + do_at, bc * 128) + (cur >> 4), D)
            assert close(dV, PT @ dO)
            dK = wg_rs(smem, pack_as_a(dST), desc(base + q_at, bc * 128) + (cur >> 4), D)
            assert close(dK, dST @ Q)


for D in (64, 128):
    for br in (64, 128):
        check_dq(D, 64, br)
        check_dkdv(D, 64, br)
        print(f"D {D} bc 64 br {br}: tiles stored once at the swizzled place, delta's reads; "
              "dq: S, dP, dQ and dk, dv: S^T, dP^T, dV, dK exact through the descriptors (2 stages)")
