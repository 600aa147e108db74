#!/usr/bin/env python3
"""A numpy mirror of the scatter kernels' ordering (embbwd;
backend_ptx/emit_scatter.c radix_sort, emit_sort and emit_rank), step for
step, against numpy's stable argsort of the bins: the order each SUM
adds in must be every bin's sources ascending (docs/format.md 5.11).

  COUNT   cnt[b] += 1 for each source's bin b
  SCAN    off = the exclusive prefix of cnt, off[bins] = K
  SORT    one CTA: the radix sort of all K sources; order[j] = perm[j]
  RANK    a CTA a chunk of T*R sources in ticket order: the chunk radix-
          sorted; each group's head reads its bin's count (the sources of
          this chunk and later ones), the group goes to
          off[b+1] - count + (j - g0); every source takes one off its count

The radix sort mirrored: thread t holds the positions tR .. tR+R-1 of the
current order (blocked), counts each digit in its column of dcnt
(digit-major, dcnt[d*T + t]), the CTA's exclusive scan of dcnt in that
linear order, and each position moves to dcnt[d*T + t] + its running
count. Exits 1 with the failing case on a mismatch."""
import sys

import numpy as np


def radix_sort(keys, T, R, passes):
    """keys: C = T*R int64 (-1 past the sources). Returns perm."""
    C = T * R
    assert keys.shape == (C,)
    perm = np.arange(C)
    ukeys = keys.astype(np.int64) & 0xFFFFFFFF  # i32 bits, lshr
    for p in range(passes):
        dcnt = np.zeros(16 * T, np.int64)
        slot = np.zeros((T, R), np.int64)
        loc = np.zeros((T, R), np.int64)
        pos = perm.reshape(T, R).copy()
        for t in range(T):  # each thread's items in order
            for r in range(R):
                d = (ukeys[pos[t, r]] >> (4 * p)) & 15
                slot[t, r] = d * T + t
                loc[t, r] = dcnt[slot[t, r]]
                dcnt[slot[t, r]] += 1
        excl = np.concatenate(([0], np.cumsum(dcnt)[:-1]))
        newperm = np.full(C, -1)
        for t in range(T):
            for r in range(R):
                rank = excl[slot[t, r]] + loc[t, r]
                assert newperm[rank] == -1
                newperm[rank] = pos[t, r]
        perm = newperm
    return perm


def passes_of(bins):
    bits = 0
    while bits < 31 and (1 << bits) < bins:
        bits += 1
    return (bits + 3) // 4 if bits else 1


def sort_fused(bin_of, bins, T, R):
    K = len(bin_of)
    keys = np.full(T * R, -1, np.int64)
    keys[:K] = bin_of
    perm = radix_sort(keys, T, R, passes_of(bins))
    return perm[:K]


def rank_chained(bin_of, bins, T, R, ticket_order):
    K = len(bin_of)
    C = T * R
    # the counts and offsets of the bins that have sources (a dict: the
    # mirror of a 2^29-element scatter_add needs no 2^29 array)
    sb = np.sort(bin_of)
    cnt = {int(u): int(c) for u, c in zip(*np.unique(bin_of, return_counts=True))}
    off = lambda x: int(np.searchsorted(sb, x, side="left"))  # noqa: E731
    order = np.full(K, -1)
    chunks = (K + C - 1) // C
    # CTAs take tickets in any order, but the ticket is the chunk, and the
    # turns run in chunk order; the sort of a chunk does not depend on when
    for c in range(chunks):
        first = c * C
        n = min(C, K - first)
        keys = np.full(C, -1, np.int64)
        keys[:n] = bin_of[first:first + n]
        perm = radix_sort(keys, T, R, passes_of(bins))
        b = keys[perm]
        head = np.zeros(C, bool)
        for j in range(n):
            head[j] = j == 0 or b[j - 1] != b[j]
        g0 = np.maximum.accumulate(np.where(head, np.arange(C), 0))
        base = {}
        for j in range(n):
            if head[j]:
                base[j] = off(b[j] + 1) - cnt[b[j]] - j
        for j in range(n):
            cnt[b[j]] -= 1
            pos = base[g0[j]] + j
            assert order[pos] == -1
            order[pos] = first + perm[j]
    assert all(v == 0 for v in cnt.values()), "counts not back to zero"
    return order, off


def check(name, bin_of, bins, T, R):
    K = len(bin_of)
    want = np.argsort(bin_of, kind="stable")
    if K <= T * R:
        got = sort_fused(bin_of, bins, T, R)
        if not np.array_equal(got, want):
            print("FAIL sort", name, "T", T, "R", R)
            return False
    # RANK with a smaller chunk, so several chunks
    for t, r in ((32, 1), (32, 3), (64, 2)):
        got, off = rank_chained(bin_of, bins, t, r, None)
        if not np.array_equal(got, want):
            print("FAIL rank", name, "T", t, "R", r)
            return False
        for b in np.unique(bin_of)[:50]:
            seg = got[off(b):off(b + 1)]
            if not (bin_of[seg] == b).all() or not (np.diff(seg) > 0).all():
                print("FAIL segment", name, b)
                return False
    return True


def main():
    rng = np.random.default_rng(7)
    cases = [
        ("distinct", rng.permutation(200)[:150], 200),
        ("dups", rng.integers(0, 7, 1000), 7),
        ("all_same", np.full(300, 5), 9),
        ("one_bin", np.zeros(77, np.int64), 1),
        ("uniform_big_bins", rng.integers(0, 50257, 517), 50257),
        ("sorted", np.sort(rng.integers(0, 40, 129)), 40),
        ("reversed", np.sort(rng.integers(0, 40, 129))[::-1].copy(), 40),
        ("last_bin", np.full(33, 2**20 - 1), 2**20),
        ("elements_2^29", rng.integers(0, 2**29, 64), 2**29),
        ("single", np.array([3]), 4),
    ]
    ok = True
    for name, b, bins in cases:
        b = np.asarray(b, np.int64)
        K = len(b)
        T = 32
        R = (K + T - 1) // T
        if R > 16:
            T = ((K + 15) // 16 + 31) // 32 * 32
            R = (K + T - 1) // T
        ok &= check(name, b, bins, T, R)
    print("scatter_rank_mirror:", "ok" if ok else "FAILED", len(cases), "cases")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
