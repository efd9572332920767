"""exp and log on doubles as JavaScript engines compute them: V8's Math.exp and Math.log are the
FreeBSD msun (fdlibm) algorithms `__ieee754_exp` (e_exp.c) and `__ieee754_log` (e_log.c), which are
accurate to < 1 ulp but not correctly rounded, so they differ in the last bit from the C library's
on some inputs. The scalar scoring of the diffusion policy (log-probs, entropies, confidences, the
log-prob gradient, the Gumbel noise) uses these two so that its doubles equal qrl-sim's bit for bit.
Written from the published algorithm and constants; tested against node's Math.exp/Math.log
(python/tests/test_numpy_diffusion.py)."""

from __future__ import annotations

import struct

_HALF = (0.5, -0.5)
_LN2HI = (6.93147180369123816490e-01, -6.93147180369123816490e-01)
_LN2LO = (1.90821492927058770002e-10, -1.90821492927058770002e-10)
_INVLN2 = 1.44269504088896338700e00
_P1, _P2, _P3, _P4, _P5 = (1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05,
                           -1.65339022054652515390e-06, 4.13813679705723846039e-08)
_O_THRESHOLD = 7.09782712893383973096e02
_U_THRESHOLD = -7.45133219101941108420e02
_TWOM1000 = 9.33263618503218878990e-302  # 2^-1000


def _hi(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0] >> 32


def _words(x: float):
    b = struct.unpack("<Q", struct.pack("<d", x))[0]
    return b >> 32, b & 0xFFFFFFFF


def _from_words(hi: int, lo: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", ((hi & 0xFFFFFFFF) << 32) | (lo & 0xFFFFFFFF)))[0]


def exp(x: float) -> float:
    """fdlibm's exp(x)."""
    hx = _hi(x)
    xsb = (hx >> 31) & 1
    hx &= 0x7FFFFFFF
    if hx >= 0x40862E42:
        if hx >= 0x7FF00000:
            lx = _words(x)[1]
            if ((hx & 0xFFFFF) | lx) != 0:
                return x + x  # NaN
            return 0.0 if xsb else x
        if x > _O_THRESHOLD:
            return float("inf")
        if x < _U_THRESHOLD:
            return 0.0
    k = 0
    hi = lo = 0.0
    if hx > 0x3FD62E42:
        if hx < 0x3FF0A2B2:
            hi = x - _LN2HI[xsb]
            lo = _LN2LO[xsb]
            k = 1 - xsb - xsb
        else:
            k = int(_INVLN2 * x + _HALF[xsb])
            t = float(k)
            hi = x - t * _LN2HI[0]
            lo = t * _LN2LO[0]
        x = hi - lo
    elif hx < 0x3E300000:
        return 1.0 + x
    t = x * x
    if k >= -1021:
        twopk = _from_words(0x3FF00000 + (k << 20), 0)
    else:
        twopk = _from_words(0x3FF00000 + ((k + 1000) << 20), 0)
    c = x - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
    if k == 0:
        return 1.0 - ((x * c) / (c - 2.0) - x)
    y = 1.0 - ((lo - (x * c) / (2.0 - c)) - hi)
    if k >= -1021:
        if k == 1024:
            return y * 2.0 * 8.98846567431157953865e307
        return y * twopk
    return y * twopk * _TWOM1000


_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_TWO54 = 1.80143985094819840000e16
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01, 2.222219843214978396e-01,
       1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01)


def log(x: float) -> float:
    """fdlibm's log(x)."""
    hx, lx = _words(x)
    if hx >= 0x80000000:
        hx -= 1 << 32  # signed high word
    k = 0
    if hx < 0x00100000:
        if ((hx & 0x7FFFFFFF) | lx) == 0:
            return float("-inf")
        if hx < 0:
            return float("nan")
        k -= 54
        x *= _TWO54
        hx = _hi(x)
    if hx >= 0x7FF00000:
        return x + x
    k += (hx >> 20) - 1023
    hx &= 0x000FFFFF
    i = (hx + 0x95F64) & 0x100000
    x = _from_words(hx | (i ^ 0x3FF00000), _words(x)[1])
    k += i >> 20
    f = x - 1.0
    if (0x000FFFFF & (2 + hx)) < 3:
        if f == 0.0:
            if k == 0:
                return 0.0
            dk = float(k)
            return dk * _LN2_HI + dk * _LN2_LO
        R = f * f * (0.5 - 0.33333333333333333 * f)
        if k == 0:
            return f - R
        dk = float(k)
        return dk * _LN2_HI - ((R - dk * _LN2_LO) - f)
    s = f / (2.0 + f)
    dk = float(k)
    z = s * s
    i = hx - 0x6147A
    w = z * z
    j = 0x6B851 - hx
    t1 = w * (_LG[1] + w * (_LG[3] + w * _LG[5]))
    t2 = z * (_LG[0] + w * (_LG[2] + w * (_LG[4] + w * _LG[6])))
    i |= j
    R = t2 + t1
    if i > 0:
        hfsq = 0.5 * f * f
        if k == 0:
            return f - (hfsq - s * (hfsq + R))
        return dk * _LN2_HI - ((hfsq - (s * (hfsq + R) + dk * _LN2_LO)) - f)
    if k == 0:
        return f - s * (f - R)
    return dk * _LN2_HI - ((s * (f - R) - dk * _LN2_LO) - f)


def exp_array(x) -> "np.ndarray":
    """`exp` elementwise over a float64 array (the same branches, vectorized): for inputs in
    (u_threshold, o_threshold), which is all the attention softmax feeds it."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    bits = x.view(np.uint64)
    hx = (bits >> np.uint64(32)).astype(np.int64)
    xsb = (hx >> 31) & 1
    hx = hx & 0x7FFFFFFF
    if np.any(hx >= 0x40862E42):
        return np.vectorize(exp, otypes=[np.float64])(x)
    mid = (hx > 0x3FD62E42) & (hx < 0x3FF0A2B2)
    big = hx >= 0x3FF0A2B2
    tiny = hx < 0x3E300000
    half = np.where(xsb == 1, -0.5, 0.5)
    kbig = np.trunc(_INVLN2 * x + half)
    k = np.where(mid, 1 - 2 * xsb, np.where(big, kbig, 0)).astype(np.int64)
    ln2hi = np.where(xsb == 1, -_LN2HI[0], _LN2HI[0])
    ln2lo = np.where(xsb == 1, -_LN2LO[0], _LN2LO[0])
    kf = k.astype(np.float64)
    hi = np.where(mid, x - ln2hi, np.where(big, x - kf * _LN2HI[0], 0.0))
    lo = np.where(mid, ln2lo, np.where(big, kf * _LN2LO[0], 0.0))
    red = mid | big
    xr = np.where(red, hi - lo, x)
    t = xr * xr
    small_k = k < -1021
    e = np.where(small_k, k + 1000, k)
    twopk = ((0x3FF00000 + (e << 20)).astype(np.uint64) << np.uint64(32)).view(np.float64)
    c = xr - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
    with np.errstate(all="ignore"):
        y0 = 1.0 - ((xr * c) / (c - 2.0) - xr)
        y = 1.0 - ((lo - (xr * c) / (2.0 - c)) - hi)
    out = np.where(small_k, y * twopk * _TWOM1000, y * twopk)
    out = np.where(k == 0, y0, out)
    return np.where(tiny, 1.0 + x, out)
