"""Reader for qrl-golden/1 directories written by ``qrl-sim golden``.

Load a golden directory, iterate the cases of a suite, and compare your implementation's outputs
with the expected tensors by each tensor's compare rule (``bitwise``, ``{"ulp": k}`` or
``{"rtol", "atol"}``). Needs numpy only; uses ml_dtypes (float8 views) and torch when importable.

    import qrl_golden
    golden = qrl_golden.load("golden/")
    for case in golden.cases("casts", format="e4m3fn", profile="satfinite"):
        codes = my_cast(case.inputs["input"])
        case.assert_matches({"codes": codes})
"""

from .reader import Case, Golden, GoldenMismatch, Mismatch, compare, load, read_safetensors
from .serve import serve

__all__ = ["Case", "Golden", "GoldenMismatch", "Mismatch", "compare", "load", "read_safetensors", "serve"]
