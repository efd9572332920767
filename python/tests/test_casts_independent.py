"""The casts suite against independent numpy bit manipulation (and ml_dtypes where installed).

Decoding: every code's value from its sign/exponent/mantissa fields (a table written here from the
OCP/IEEE definitions, not from qrl-sim). Encoding: finite in-range inputs rounded by searching the
sorted table of representable magnitudes, ties by the mode; bf16 RNE by the classic integer trick;
fp16 RNE by numpy's own float16 cast; every ml-dtypes/rne case by ml_dtypes' astype.
"""

import numpy as np
import pytest

# name: (bits, exp_bits, man_bits, bias, signed, has_inf, nan encoding, subnormals)
FORMATS = {
    "e4m3fn": (8, 4, 3, 7, True, False, "all-ones", True),
    "e4m3fnuz": (8, 4, 3, 8, True, False, "neg-zero", True),
    "e5m2": (8, 5, 2, 15, True, True, "ieee", True),
    "e5m2fnuz": (8, 5, 2, 16, True, False, "neg-zero", True),
    "e3m2": (6, 3, 2, 3, True, False, "none", True),
    "e2m3": (6, 2, 3, 1, True, False, "none", True),
    "e2m1": (4, 2, 1, 1, True, False, "none", True),
    "e8m0": (8, 8, 0, 127, False, False, "all-ones", False),
    "bf16": (16, 8, 7, 127, True, True, "ieee", True),
    "fp16": (16, 5, 10, 15, True, True, "ieee", True),
    "tf32": (19, 8, 10, 127, True, True, "ieee", True),
    "fp32": (32, 8, 23, 127, True, True, "ieee", True),
}


def decode(fmt, codes):
    bits, eb, mb, bias, signed, has_inf, nan, sub = FORMATS[fmt]
    c = codes.astype(np.int64)
    sign = (c >> (bits - 1)) & 1 if signed else np.zeros_like(c)
    e = (c >> mb) & ((1 << eb) - 1)
    m = c & ((1 << mb) - 1)
    with np.errstate(over="ignore"):
        if sub:
            mag = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mb), np.ldexp((m + (1 << mb)).astype(np.float64), e - bias - mb))
        else:
            mag = np.ldexp((m + (1 << mb)).astype(np.float64), e - bias - mb)
    val = np.where(sign == 1, -mag, mag)
    e_all, m_all = (1 << eb) - 1, (1 << mb) - 1
    if nan == "ieee":
        is_nan = (e == e_all) & (m != 0)
    elif nan == "all-ones":
        is_nan = (e == e_all) & (m == m_all)
    elif nan == "neg-zero":
        is_nan = (sign == 1) & (e == 0) & (m == 0)
    else:
        is_nan = np.zeros_like(c, dtype=bool)
    if has_inf:
        val = np.where((e == e_all) & (m == 0), np.where(sign == 1, -np.inf, np.inf), val)
    return np.where(is_nan, np.nan, val).astype(np.float32)


def magnitudes(fmt):
    """Sorted distinct finite non-negative values and, for each, its (smallest) code."""
    bits, *_ , signed = FORMATS[fmt][:5]
    top = 1 << (bits - 1) if FORMATS[fmt][4] else 1 << bits
    codes = np.arange(top, dtype=np.int64)
    vals = decode(fmt, codes).astype(np.float64)
    keep = np.isfinite(vals)
    return vals[keep], codes[keep]


def reference_round(fmt, x, mode, rbits):
    """Rounded magnitudes of finite float32 x (NaN where this independent model does not apply)."""
    vals, _ = magnitudes(fmt)
    with np.errstate(invalid="ignore"):
        a = np.abs(x.astype(np.float64))
    i = np.searchsorted(vals, a, side="right") - 1
    ok = (i >= 0) & (i + 1 < len(vals)) & np.isfinite(a)
    i = np.clip(i, 0, len(vals) - 2)
    lo, hi = vals[i], vals[i + 1]
    exact = a == lo
    frac = np.where(ok, (a - lo) / np.where(hi > lo, hi - lo, 1), 0)
    if mode == "rne":
        # adjacent magnitudes alternate mantissa parity; with no mantissa bits (E8M0) the implicit 1 is odd
        odd = ((i % 2) == 1) if FORMATS[fmt][2] > 0 else np.ones_like(ok)
        up = (frac > 0.5) | ((frac == 0.5) & odd)
    elif mode == "rha":
        up = frac >= 0.5
    elif mode == "rhz":
        up = frac > 0.5
    elif mode == "rtz":
        up = np.zeros_like(ok)
    else:
        up = np.floor(frac * 2.0**32) + rbits.astype(np.float64) >= 2.0**32
    out = np.where(exact, lo, np.where(up, hi, lo))
    return np.where(ok, out, np.nan)


@pytest.mark.qrl_golden("casts")
def test_values_are_the_decoded_codes(golden_case):
    fmt = golden_case.params["format"]
    golden_case.assert_matches({"values": decode(fmt, golden_case.arrays()["codes"])})


@pytest.mark.qrl_golden("casts", where=lambda p: p["format"] not in ("fp32",))
def test_finite_in_range_inputs_round_by_the_mode(golden_case):
    fmt, mode = golden_case.params["format"], golden_case.params["mode"]
    arrays = golden_case.arrays()
    x = arrays["input"]
    got = decode(fmt, arrays["codes"]).astype(np.float64)
    ref = reference_round(fmt, x, mode, arrays.get("randomBits"))
    vals, _ = magnitudes(fmt)
    smallest = vals[vals > 0].min()
    # where the independent model applies: finite result below max, nonzero, and (e8m0) a value the format has
    applies = np.isfinite(ref) & (ref > 0) & (ref <= vals.max()) & (np.abs(x) >= (smallest if fmt == "e8m0" else 0))
    if not FORMATS[fmt][4]:
        applies &= x > 0
    if fmt == "e8m0" and mode == "rne" and golden_case.params["profile"] in ("torch-2.13", "torch-2.11", "ml-dtypes"):
        # c10 and ml_dtypes round the exponent field on the bits: float32 subnormals in
        # (2^-127, 1.5*2^-127] go up to 2^-126 (checked against the libraries by qrl_golden.library_casts)
        b = x.view(np.uint32) & 0x7FFFFFFF
        applies &= ~((b > 0x00400000) & (b <= 0x00600000))
    expected = np.where(np.signbit(x), -ref, ref)
    checked = int(applies.sum())
    assert checked > 0
    bad = np.flatnonzero(applies & (got != expected))
    if bad.size:
        k = bad[0]
        raise AssertionError(f"{golden_case.file}: input[{k}] = {x[k]!r} ({x[k:k+1].view(np.uint32)[0]:#010x}) rounds to {got[k]!r}, independent {mode} gives {expected[k]!r} ({bad.size} of {checked})")


@pytest.mark.qrl_golden("casts", format="bf16", mode="rne", where=lambda p: p["profile"] in ("ieee", "torch-2.11", "ml-dtypes", "onnx-sat", "ort-1.30"))
def test_bf16_rne_matches_the_integer_trick(golden_case):
    x = golden_case.inputs["input"]
    b = x.view(np.uint32).astype(np.uint64)
    codes = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    keep = ~np.isnan(x)
    got = golden_case.arrays()["codes"]
    assert np.array_equal(got[keep], codes[keep]), golden_case.compare({"codes": np.where(keep, codes, got)})


@pytest.mark.qrl_golden("casts", format="fp16", mode="rne", where=lambda p: p["profile"] in ("ieee", "ml-dtypes", "ort-1.30", "onnx-sat", "torch-2.11"))
def test_fp16_rne_matches_numpy(golden_case):
    x = golden_case.inputs["input"]
    keep = ~np.isnan(x)
    codes = x.astype(np.float16).view(np.uint16)
    got = golden_case.arrays()["codes"]
    assert np.array_equal(got[keep], codes[keep]), golden_case.compare({"codes": np.where(keep, codes, got)})


ML_DTYPES = {
    "e4m3fn": "float8_e4m3fn", "e4m3fnuz": "float8_e4m3fnuz", "e5m2": "float8_e5m2", "e5m2fnuz": "float8_e5m2fnuz",
    "e3m2": "float6_e3m2fn", "e2m3": "float6_e2m3fn", "e2m1": "float4_e2m1fn", "e8m0": "float8_e8m0fnu", "bf16": "bfloat16",
}


@pytest.mark.qrl_golden("casts", profile="ml-dtypes", mode="rne")
def test_ml_dtypes_profile_matches_ml_dtypes(golden_case):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    fmt = golden_case.params["format"]
    name = ML_DTYPES.get(fmt)
    if name is None or not hasattr(ml_dtypes, name):
        pytest.skip(f"ml_dtypes has no {fmt}")
    x = golden_case.inputs["input"]
    y = x.astype(getattr(ml_dtypes, name))
    codes = y.view(np.uint16 if y.dtype.itemsize == 2 else np.uint8)
    if golden_case.params["bits"] < 8:
        codes = codes & ((1 << golden_case.params["bits"]) - 1)
    golden_case.assert_matches({"codes": codes})
