#!/usr/bin/env python3
"""A numpy model of the wgmma attention kernel's operand layouts (issue 19,
backend_ptx/emit_attention.c, "wgmma"), run by hand: python3 this.py.

Checks, for D 64 and 128 and bc 64 and 128, br 128 (two warpgroups) and 64:
1. load_tile_sw's stores (thread tid, piece u -> shared byte) cover each
   tile once, and put element (row, col) at the 128-byte swizzle's place.
2. Reading the shared image back as wgmma would, from the kernel's
   descriptors (start, leading and stride byte offsets) through CUTLASS's
   canonical SW128 layouts (cute/atom/mma_traits_sm90_gmma.hpp,
   make_gmma_desc: K-major ((8,m),(T,2k)):((8T,SBO),(1,T)), MN-major
   ((8T,m),(8,k)):((1,LBO),(8T,SBO)), T = 8 16-bit elements, then the
   swizzle of byte-address bits 4-6 by bits 7-9), gives S = Q K^T and
   O = P V exactly.
3. The D fragment (thread, register) -> (row, col) of m64nNk16
   (MLIR NVGPUToNVVM storeFragmentedMatrix), packed as the kernel packs P,
   is the A register fragment of m64nNk16 (mma.m16n8k16's A, warp by warp).
"""
import numpy as np

rng = np.random.default_rng(1)


def swz(addr):
    return addr ^ (((addr >> 7) & 7) << 4)


def store_tile(smem, at, tile, block):
    """load_tile_sw: thread tid's pieces are chunk tid % (D/8), rows
    tid // (D/8) + step u; byte (cc//8) rows 128 + row 128 + ((cc%8)^(rr%8)) 16."""
    rows, D = tile.shape
    per_row = D // 8
    step, n = block // per_row, rows * per_row // block
    assert step % 8 == 0 and rows * per_row % block == 0
    seen = np.zeros(smem.size, bool)
    for tid in range(block):
        rr, cc = tid // per_row, tid % per_row
        base = at + (cc // 8) * rows * 128 + rr * 128 + ((cc % 8) ^ (rr % 8)) * 16
        for u in range(n):
            row = rr + step * u
            addr = base + u * step * 128
            # the canonical place: logical (atom, row, chunk) swizzled
            logical = at + (cc // 8) * rows * 128 + row * 128 + (cc % 8) * 16
            assert swz(logical) == addr, (tid, u)
            e = addr // 2
            assert not seen[e:e + 8].any()
            seen[e:e + 8] = True
            smem[e:e + 8] = tile[row, cc * 8:cc * 8 + 8]
    return seen


def desc(start, lbo, sbo):
    return (start >> 4) & 0x3FFF | (lbo >> 4) << 16 | (sbo >> 4) << 32 | 1 << 62


def undesc(d):
    return (d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4, d >> 62


def read_kmajor(smem, d, rows):
    """operand rows x 16 (K) of a K-major SW128 descriptor"""
    start, _, sbo, mode = undesc(d)
    assert mode == 1
    out = np.zeros((rows, 16), smem.dtype)
    for r in range(rows):
        for k in range(16):
            out[r, k] = smem[swz(start + (r % 8) * 128 + (r // 8) * sbo + k * 2) // 2]
    return out


def read_mnmajor(smem, d, n):
    """operand 16 (K) x n of an MN-major SW128 descriptor"""
    start, lbo, sbo, mode = undesc(d)
    assert mode == 1
    out = np.zeros((16, n), smem.dtype)
    for k in range(16):
        for c in range(n):
            out[k, c] = smem[swz(start + (c % 64) * 2 + (c // 64) * lbo + (k % 8) * 128 +
                                 (k // 8) * sbo) // 2]
    return out


def d_frag(N):
    """(warp, lane, reg) -> (row, col) of the m64nN f32 D fragment"""
    m = {}
    for w in range(4):
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for j in range(N // 8):
                for h in range(2):
                    for c in range(2):
                        m[(w, lane, 4 * j + 2 * h + c)] = (16 * w + g + 8 * h, 8 * j + 2 * t + c)
    return m


def a_frag():
    """(warp, lane, half-word e of a0..a7) -> (row, col) of the m64k16 A register fragment"""
    m = {}
    for w in range(4):
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for e in range(8):
                row = 16 * w + g + 8 * ((e // 2) % 2)
                col = 2 * t + (e % 2) + 8 * (e // 4)
                m[(w, lane, e)] = (row, col)
    return m


def check(D, bc, br):
    block = 2 * br  # 128 threads a warpgroup of 64 rows
    q = rng.standard_normal((br, D)).astype(np.float32)
    k = rng.standard_normal((bc, D)).astype(np.float32)
    v = rng.standard_normal((bc, D)).astype(np.float32)
    smem_bytes = (br + 2 * bc) * D * 2
    smem = np.zeros(smem_bytes // 2, np.float32)  # one slot a 16-bit element
    base = 1024 * 7  # any multiple of 1024 (the kernel rounds up to one)
    q_at, k_at = 0, br * D * 2
    v_at = k_at + bc * D * 2
    cover = np.zeros(smem.size, bool)
    big = np.zeros((base + smem_bytes) // 2, np.float32)
    for at, t in ((q_at, q), (k_at, k), (v_at, v)):
        cover |= store_tile(big, base + at, t, block)[base // 2:]
    assert cover.all()
    kdesc0 = desc(base + k_at, 16, 1024)
    vdesc0 = desc(base + v_at, bc * 128, 1024)
    for wg in range(br // 64):
        qdesc = desc(base + q_at + wg * 64 * 128, 16, 1024)
        S = np.zeros((64, bc), np.float32)
        for kk in range(D // 16):
            qo = ((kk // 4) * br * 128 + (kk % 4) * 32) >> 4
            ko = ((kk // 4) * bc * 128 + (kk % 4) * 32) >> 4
            A = read_kmajor(big, qdesc + qo, 64)
            B = read_kmajor(big, kdesc0 + ko, bc)  # N x K
            S += A @ B.T
        ref = q[64 * wg:64 * wg + 64] @ k.T
        assert np.allclose(S, ref, rtol=1e-5, atol=1e-4), (D, bc, br, wg)
        # P from the D fragment, packed as the kernel packs it, read as A
        P = rng.standard_normal((64, bc)).astype(np.float32)
        dm, am = d_frag(bc), a_frag()
        Pa = np.full((bc // 16, 64, 16), np.nan, np.float32)
        for w in range(4):
            for lane in range(32):
                s = {j: [P[dm[(w, lane, 4 * j + i)]] for i in range(4)] for j in range(bc // 8)}
                for j in range(bc // 16):
                    # pa[j] = (s[2j][0], s[2j][1]), (s[2j][2], s[2j][3]),
                    #         (s[2j+1][0], s[2j+1][1]), (s[2j+1][2], s[2j+1][3])
                    halves = s[2 * j] + s[2 * j + 1]
                    for e in range(8):
                        r, c = am[(w, lane, e)]
                        assert np.isnan(Pa[j, r, c])
                        Pa[j, r, c] = halves[e]
        O = np.zeros((64, D), np.float32)
        for j in range(bc // 16):
            B = read_mnmajor(big, vdesc0 + ((j * 2048) >> 4), D)  # K x N
            O += Pa[j] @ B
        assert np.allclose(O, P @ v, rtol=1e-5, atol=1e-4), (D, bc, br, wg)
    return True


for D in (64, 128):
    for bc in (64, 128):
        for br in (64, 128):
            check(D, bc, br)
            print(f"D {D} bc {bc} br {br}: stores cover each tile once at the swizzled place; "
                  "S = Q K^T and O = P V exact through the descriptors")
