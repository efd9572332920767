"""The torch transcriptions' own casts checked against each other, independently of qrl-sim: the PTX
E2M1 rule, torchao's bit-trick E2M1 cast and TE's threshold table agree on every finite float32
input class (ties, saturation, subnormals), and differ exactly where their sources say (NaN, −0);
DeepGEMM's ceil_to_ue8m0 on NaN and Inf."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tq = pytest.importorskip("qrl_golden.torch_quantizers")

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def _inputs():
    vals = set()
    for i, v in enumerate(E2M1):
        vals.add(v)
        if i + 1 < len(E2M1):
            mid = (v + E2M1[i + 1]) / 2
            vals.update([mid, float(np.nextafter(np.float32(mid), np.float32(0))), float(np.nextafter(np.float32(mid), np.float32(9)))])
    vals.update([5.9999, 6.0, 6.5, 7.0, 1e30, 1e-45, 1e-39, 0.1, 0.26, 0.2499])
    xs = sorted(vals)
    return torch.tensor(xs + [-v for v in xs if v != 0], dtype=torch.float32)


def test_e2m1_casts_agree_on_finite_nonzero_inputs():
    x = _inputs()
    ptx = tq._e2m1_satfinite(x)
    ao = tq._torchao_f4_unpacked(x)
    te = tq._te_cast_to_fp4(torch.clamp(x, -6.0, 6.0))
    assert torch.equal(ptx, ao)
    assert torch.equal(ptx, te)
    # ties go to the even code: 0.25 → 0, 0.75 → 1.0, 2.5 → 2, 5 → 4
    t = tq._e2m1_satfinite(torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]))
    assert t.tolist() == [0, 2, 2, 4, 4, 6, 6]


def test_e2m1_casts_differ_where_their_sources_say():
    x = torch.tensor([-0.0, float("nan"), float("inf"), -float("inf")])
    assert tq._e2m1_satfinite(x).tolist() == [0x8, 0x7, 0x7, 0xF]  # PTX: −0 kept, NaN → +6, ±Inf saturate
    assert tq._te_cast_to_fp4(torch.clamp(x, -6.0, 6.0)).tolist() == [0x0, 0x0, 0x7, 0xF]  # TE: −0 → +0, NaN → 0
    assert tq._torchao_f4_unpacked(x).tolist()[0] == 0x8  # torchao keeps the sign of −0


def test_ceil_to_ue8m0_reads_nan_and_inf_from_their_bits():
    s = torch.tensor([float("nan"), float("inf"), 1.0, 1.0000001, 2.0**-130])
    out = tq._ceil_to_ue8m0(s)
    assert out.tolist() == [2.0**127, 2.0**127, 1.0, 2.0, 2.0**-126]


def test_satfinite_e4m3_writes_positive_nan():
    x = torch.tensor([-float("nan"), float("nan"), 1e9, -float("inf")])
    assert tq._e4m3_satfinite(x).tolist() == [0x7F, 0x7F, 0x7E, 0xFE]
