"""A plain numpy Philox-4x32-10 (Random123's philox4x32_R(10, ...)), written from the
paper and Random123's philox.h, not from zynml/cirgen/philox.py: the tests compare the
compiled builtins against it. All arithmetic on uint64 arrays, masked to 32 bits."""
import numpy as np

MASK = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter, key):
    """Four uint32 arrays (the output words) for `counter`: four arrays (or ints) of
    32-bit words, `key`: two."""
    c = [np.asarray(w, dtype=np.uint64) & MASK for w in counter]
    k = [np.asarray(w, dtype=np.uint64) & MASK for w in key]
    for r in range(10):
        if r:
            k = [(k[0] + np.uint64(0x9E3779B9)) & MASK, (k[1] + np.uint64(0xBB67AE85)) & MASK]
        p0 = np.uint64(0xD2511F53) * c[0]  # < 2^64: no wrap
        p1 = np.uint64(0xCD9E8D57) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & MASK
        hi1, lo1 = p1 >> np.uint64(32), p1 & MASK
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
    return [w.astype(np.uint32) for w in c]


def _split(v):
    """(low, high) 32-bit words of int64 values (two's complement)."""
    u = np.asarray(v, dtype=np.int64).view(np.uint64)
    return u & MASK, u >> np.uint64(32)


def words(seed, counter):
    """The output words of rand(seed, counter): key (lo, hi of seed), counter (lo, hi of
    counter, 0, 0)."""
    c0, c1 = _split(counter)
    zero = np.zeros_like(c0)
    return philox4x32_10([c0, c1, zero, zero], list(_split(seed)))


def rand(seed, counter):
    """rand: (word0 >> 8) * 2^-24 as float32 (exact)."""
    w0 = words(seed, counter)[0]
    return ((w0 >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24))


def randn(seed, counter):
    """randn in float64 from the same uniforms: sqrt(-2 log u1) cos(2 pi u2)."""
    w0, w1 = words(seed, counter)[:2]
    u1 = ((w0 >> np.uint32(8)).astype(np.float64) + 1) * 2.0 ** -24
    u2 = (w1 >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    angle = np.float32(2 * np.pi) * u2.astype(np.float32)  # the f32 product the kernel takes
    return np.sqrt(-2 * np.log(u1)) * np.cos(angle.astype(np.float64))
