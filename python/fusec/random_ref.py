"""The random-number stream of fusec's rand, randn and dropout, in numpy.

A reference a user can run outside fusec (docs/format.md 5.12 states the
stream; ir/random.c is the compiler's copy). Needs numpy only:

    from fusec.random_ref import rand, randn, dropout
    u = rand((3, 5), "f32", seed=42, offset=0)      # bitwise what fusec gives
    y = dropout(x, p=0.1, seed=42, offset=7)        # x: f32 or f64 array

- Philox-4x32-10, key (lo32(seed), hi32(seed)); element i (linear index in
  the logical row-major result) takes block counter
  (lo32(i // 4), hi32(i // 4), lo32(offset), hi32(offset)) and word i % 4.
- rand: (w >> (32 - b)) * 2**-b with b the dtype's significand bits (24 for
  f32, 11 f16, 8 bf16, 4 f8e4m3, 3 f8e5m2) and 32 for f64. Narrow dtypes are
  returned as float32 arrays holding values that are exact in the dtype.
- randn: Box-Muller on the block's word pair (2p, 2p+1), p = (i % 4) // 2:
  u1 = ((a >> 8) + 1) * 2**-24, u2 = (b >> 8) * 2**-24 (f64: 32 bits, a + 1),
  r = sqrt(-2 ln u1), z = r cos(2 pi u2) for even i, r sin(2 pi u2) for odd i,
  in f32 (f64 for f64). Transcendentals are not bit-exact across libraries;
  this follows the interpreter's steps (each f32 op rounded, transcendentals
  in f64 rounded to f32).
- dropout: where(rand_f32 >= p_f32, x * f32(1/(1-p)), 0) for x in f32 (the
  product rounded to f32; f64 x computes in f64; for bf16/f16 round the f32
  result to the dtype); p = 1 gives zeros.
"""
import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
_MASK = np.uint64(0xFFFFFFFF)

SIGNIFICAND_BITS = {"f64": 32, "f32": 24, "f16": 11, "bf16": 8, "f8e4m3": 4, "f8e5m2": 3}


def philox4x32_10(ctr, key):
    """ctr: 4 uint32 arrays (broadcastable), key: 2 uint32 values -> 4 uint32 arrays."""
    c = [np.asarray(x, dtype=np.uint64) for x in ctr]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for r in range(10):
        if r:
            k0 = (k0 + np.uint64(W0)) & _MASK
            k1 = (k1 + np.uint64(W1)) & _MASK
        p0 = c[0] * np.uint64(M0)  # < 2**64: no wrap
        p1 = c[2] * np.uint64(M1)
        hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK
        hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return [x.astype(np.uint32) for x in c]


def _u64(v):
    """An integer seed/offset as its 64-bit two's complement word."""
    return int(v) & 0xFFFFFFFFFFFFFFFF


def blocks(n, seed, offset):
    """The 4 words of the block of each element index 0..n-1, shape (n, 4)."""
    seed, offset = _u64(seed), _u64(offset)
    b = np.arange(n, dtype=np.uint64) >> np.uint64(2)
    ctr = [b & _MASK, b >> np.uint64(32), np.uint64(offset & 0xFFFFFFFF), np.uint64(offset >> 32)]
    w = philox4x32_10(ctr, (seed & 0xFFFFFFFF, seed >> 32))
    return np.stack([np.broadcast_to(x, (n,)) for x in w], axis=1)


def bits(shape, seed, offset):
    """The 32-bit word each element of a result of `shape` uses (uint32)."""
    n = int(np.prod(shape, dtype=np.int64))
    w = blocks(n, seed, offset)
    return w[np.arange(n), np.arange(n) % 4].reshape(shape)


def rand(shape, dtype, seed, offset):
    b = SIGNIFICAND_BITS[dtype]
    w = bits(shape, seed, offset).astype(np.uint64) >> np.uint64(32 - b)
    out = w.astype(np.float64) * 2.0 ** -b
    return out if dtype == "f64" else out.astype(np.float32)


def randn(shape, dtype, seed, offset):
    n = int(np.prod(shape, dtype=np.int64))
    w = blocks(n, seed, offset).astype(np.uint64)
    i = np.arange(n)
    p = (i % 4) // 2
    a, b = w[i, 2 * p], w[i, 2 * p + 1]
    odd = (i % 2) == 1
    if dtype == "f64":
        u1 = (a.astype(np.float64) + 1.0) * 2.0 ** -32
        u2 = b.astype(np.float64) * 2.0 ** -32
        r = np.sqrt(-2.0 * np.log(u1))
        t = 6.283185307179586 * u2
        return (r * np.where(odd, np.sin(t), np.cos(t))).reshape(shape)
    f = np.float32
    u1 = ((a >> np.uint64(8)) + np.uint64(1)).astype(f) * f(2.0 ** -24)
    u2 = (b >> np.uint64(8)).astype(f) * f(2.0 ** -24)
    lg = np.log(u1.astype(np.float64)).astype(f)
    r = np.sqrt(f(-2.0) * lg)
    t = f(6.28318548) * u2
    s = np.where(odd, np.sin(t.astype(np.float64)), np.cos(t.astype(np.float64))).astype(f)
    return (r * s).reshape(shape)


def keep_mask(shape, p, seed, offset):
    """dropout's mask: True where the element is kept."""
    return rand(shape, "f32", seed, offset) >= np.float32(p)


def dropout(x, p, seed, offset):
    """x: a float32 or float64 array (for bf16/f16, pass float32 values and
    round the result to the dtype)."""
    x = np.asarray(x)
    keep = keep_mask(x.shape, p, seed, offset)
    scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
    if x.dtype == np.float64:
        return np.where(keep, x * scale, 0.0)
    xs = x.astype(np.float32) * np.float32(scale)
    return np.where(keep, xs, np.float32(0.0)).astype(np.float32)
