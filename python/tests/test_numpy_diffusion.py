"""The numpy masked-diffusion backend (qrl_backend.numpy_diffusion): its exp/log and random streams
equal JavaScript's bit for bit (node as the oracle), the sampler keeps LLaDA's schedule (exactly k[i]
commits per step, only inside the current block, MASK never emitted, no draws when greedy), same seed ⇒
same record, ℓroll = ℓ exactly under identical plans for all three estimators, the d1/ELBO views come
from the record's seed, the backward matches finite differences, save/load restores the state.
(The run-level agreement with the in-process engine: test/python/numpy-diffusion-run.test.ts.)"""

import json
import math
import os
import shutil
import subprocess

import numpy as np
import pytest

from qrl_backend.numpy_diffusion import DiffusionConfig, NumpyDiffusionBackend, Plan, SamplerConfig, backward, forward, init_params
from qrl_backend.numpy_diffusion import fdlibm
from qrl_backend.numpy_diffusion.policy import MASK, sample
from qrl_backend.numpy_diffusion.rng import Rng

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CFG = DiffusionConfig(vocabSize=13, maxLen=16, C=16, H=2, layers=1, hidden=32)
PROMPTS = [[1, 5, 6, 7, 3], [1, 8, 9, 10, 3], [1, 11, 12, 5, 3]]


def _node(script: str, inp: bytes = b"") -> bytes:
    node = shutil.which("node")
    if node is None or not os.path.exists(os.path.join(ROOT, "node_modules", "tsx")):
        pytest.skip("node and the repository's node_modules (tsx) are needed for the JavaScript oracle")
    return subprocess.run([node, "--import", "tsx", "--input-type=module", "-e", script], input=inp, cwd=ROOT, check=True, capture_output=True, timeout=120).stdout


def test_exp_and_log_equal_javascripts_bit_for_bit():
    rng = np.random.default_rng(5)
    xs = np.concatenate([rng.uniform(-40, 3, 20000), rng.uniform(-1, 1, 5000), rng.uniform(-1e-8, 1e-8, 200), [0.0, -745.0, 1e-300]])
    ls = np.concatenate([rng.uniform(1e-12, 1, 10000), np.exp(rng.uniform(-700, 700, 5000)), rng.uniform(0.9999, 1.0001, 2000), [1.0, 5e-324]])
    out = _node("""
      import { readFileSync } from 'node:fs';
      const b = readFileSync(0); const n = b.readUInt32LE(0);
      const a = new Float64Array(b.buffer.slice(b.byteOffset + 8, b.byteOffset + b.length));
      const r = Float64Array.from(a, (x, i) => (i < n ? Math.exp(x) : Math.log(x)));
      process.stdout.write(Buffer.from(r.buffer));""", np.array([len(xs), 0], "<u4").tobytes() + np.concatenate([xs, ls]).astype("<f8").tobytes())
    js = np.frombuffer(out, "<f8")
    mine = np.array([fdlibm.exp(float(x)) for x in xs] + [fdlibm.log(float(x)) for x in ls])
    assert np.array_equal(mine, js)
    assert np.array_equal(fdlibm.exp_array(xs), js[: len(xs)])
    libm = np.array([math.exp(float(x)) for x in xs])
    assert np.sum(libm != js[: len(xs)]) > 0  # the C library's exp is not JavaScript's: the check is not vacuous


def test_streams_equal_qrl_sims():
    out = _node("""
      import { createRng } from './src/core/rng.ts';
      const r = createRng('7/step-2/rollout').fork('row-3');
      const u = [r.uniform(), r.uniformOpen(), r.uint32(), r.int(7), r.normal()];
      console.log(JSON.stringify([u, r.shuffle([0, 1, 2, 3, 4, 5, 6, 7])]));""")
    want = json.loads(out)
    r = Rng("7/step-2/rollout").fork("row-3")
    assert [[r.uniform(), r.uniform_open(), r.uint32(), r.int(7), r.normal()], r.shuffle(list(range(8)))] == want


def test_schedule_is_validated_naming_the_field():
    assert SamplerConfig(8, 4, 4).schedule() == (2, 2, [2, 2])
    assert SamplerConfig(8, 8, 3).schedule() == (1, 3, [3, 3, 2])
    for sc, field in [(SamplerConfig(8, 3, 4), "blockLength"), (SamplerConfig(8, 4, 3), "steps"), (SamplerConfig(8, 4, 10), "steps")]:
        with pytest.raises(ValueError, match=field):
            sc.schedule()


@pytest.mark.parametrize("tau", [1.0, 0.6, 0.0])
def test_the_sampler_keeps_the_schedule_and_never_emits_mask(tau):
    P = init_params(CFG, "1/diffusion-policy")
    sc = SamplerConfig(8, 4, 4, tau)
    seqs, logp, tau_l, support = sample(CFG, P, PROMPTS, sc, Plan("fp32"), "1/s")
    assert tau_l == (tau if tau > 0 else 1.0) and support is None
    for s in seqs:
        cs = np.asarray(s.commit_step)
        assert MASK not in s.response
        for step in range(4):
            slots = np.nonzero(cs == step)[0]
            assert len(slots) == 2  # k[i] = 2 tokens per step
            assert np.all(slots // 4 == step // 2)  # only inside the current block
    assert np.all(logp < 0) and np.all(np.isfinite(logp))


def test_greedy_draws_nothing_and_ignores_the_seed():
    P = init_params(CFG, "1/diffusion-policy")
    a = sample(CFG, P, PROMPTS, SamplerConfig(8, 4, 4, 0.0), Plan("fp32"), "a")[0]
    b = sample(CFG, P, PROMPTS, SamplerConfig(8, 4, 4, 0.0), Plan("fp32"), "b")[0]
    assert [s.response for s in a] == [s.response for s in b]


def _backend(estimator, plan="fp32", sc=SamplerConfig(8, 4, 4)):
    P = {k: v * 4 for k, v in init_params(CFG, "2/diffusion-policy").items()}  # sharpened: ℓ away from −log V
    P = {k: (np.ones_like(v) if k.endswith("weight") and v.ndim == 1 else v) for k, v in P.items()}
    return NumpyDiffusionBackend(CFG, P, sc, estimator, plan=plan, lr=0.01)


@pytest.mark.parametrize("estimator", ["trajectory", "d1", "elbo"])
@pytest.mark.parametrize("plan", ["fp32", "bf16"])
def test_same_seed_same_record_and_rollout_equals_trainer(estimator, plan):
    be = _backend(estimator, plan)
    a = be.generate(PROMPTS, "9/step-1/rollout", None, False, "rollout")
    b = be.generate(PROMPTS, "9/step-1/rollout", None, False, "rollout")
    assert a.record.to_json() == b.record.to_json() and np.array_equal(a.logp_rollout, b.logp_rollout)
    c = be.generate(PROMPTS, "9/step-2/rollout", None, False, "rollout")
    assert a.record.to_json()["sequences"] != c.record.to_json()["sequences"]
    lp = be.logprobs(a, [0, 1, 2], "current", False)
    assert np.array_equal(lp.logp, a.logp_rollout)  # identical plans: ℓroll = ℓ bit for bit
    sub = be.logprobs(a, [2, 0], "current", False)
    assert np.array_equal(sub.logp, lp.logp[[2, 0]])
    assert np.all(lp.entropy >= 0) and np.all(lp.logp[a.mask == 1] <= 0)


@pytest.mark.parametrize("estimator", ["d1", "elbo"])
def test_the_views_come_from_the_records_seed(estimator):
    be = _backend(estimator)
    a = be.generate(PROMPTS, "9/step-1/rollout", None, False, "rollout")
    base = be.logprobs(a, [0, 1, 2], "current", False).logp
    a.record.estimator_seed = "another seed"
    assert not np.array_equal(be.logprobs(a, [0, 1, 2], "current", False).logp, base)


def test_elbo_shares_sum_to_the_sequence_elbo():
    be = _backend("elbo")
    a = be.generate(PROMPTS, "9/step-1/rollout", None, False, "rollout")
    from qrl_backend.numpy_diffusion.policy import score, views_for
    v = views_for("elbo", a.record.sequences, a.record.estimator_seed)
    lp = score(CFG, be.params, be.trainer_plan, v, 3, 8, 1.0, None)[0].reshape(3, 8)
    z, _ = forward(CFG, be.params, v.tokens, be.trainer_plan)
    for i in range(3):
        M = 8
        total = 0.0
        for m in range(M):
            r = i * M + m
            masked = [e for e in range(len(v.row)) if v.row[e] == r]
            l = len(masked)
            for e in masked:
                zz = z[r, v.pos[e]].astype(np.float64)
                zz = np.delete(zz, MASK)
                t = v.target[e] - (1 if v.target[e] > MASK else 0)
                total += (8 / l) * (zz[t] - (zz.max() + np.log(np.sum(np.exp(zz - zz.max())))))
        assert lp[i].sum() == pytest.approx(total / M, rel=1e-12)


@pytest.mark.parametrize("estimator", ["trajectory", "d1", "elbo"])
def test_backward_matches_finite_differences(estimator):
    be = _backend(estimator)
    a = be.generate(PROMPTS, "4/step-1/rollout", None, False, "rollout")
    w = np.random.default_rng(0).standard_normal((3, 8)) * a.mask
    lp = be.logprobs(a, [0, 1, 2], "current", True)
    be.backward(lp.handle, w.reshape(-1))
    rng = np.random.default_rng(1)
    for name in ["wte", "wpe", "h0.attn.wq", "h0.attn.bk", "h0.attn.wo", "h0.ln1.weight", "h0.mlp.up", "h0.mlp.downBias", "lnf.bias", "lmHead"]:
        grads = []
        P = be.params[name]
        for _ in range(3):
            idx = tuple(int(rng.integers(0, s)) for s in P.shape)
            if name == "wpe":
                idx = (int(rng.integers(0, 13)),) + idx[1:]
            old = P[idx]
            h = 1e-2 * max(1.0, abs(float(old)))
            vals = []
            for d in (h, -h):
                P[idx] = np.float32(old + d)
                vals.append(float(np.sum(w * be.logprobs(a, [0, 1, 2], "current", False).logp)))
            P[idx] = old
            grads.append(((vals[0] - vals[1]) / (2 * h), float(be.grads[name][idx])))
        fd, an = np.array(grads).T
        assert np.allclose(an, fd, rtol=0.05, atol=2e-3 * max(1.0, np.abs(fd).max())), (name, grads)


def test_step_save_load_round_trip(tmp_path):
    be = _backend("d1")
    be.sync()
    a = be.generate(PROMPTS, "4/step-1/rollout", None, False, "rollout")
    lp = be.logprobs(a, [0, 1, 2], "current", True)
    be.backward(lp.handle, -a.mask.reshape(-1))
    out = be.step(1.0)
    assert out["weightVersion"] == 1 and out["gradNorm"] > 0
    after = be.logprobs(a, [0, 1, 2], "current", False).logp
    assert np.sum(after) > np.sum(lp.logp)  # one step up the samples' likelihood
    be.save(str(tmp_path))
    be.backward(be.logprobs(a, [0, 1, 2], "current", True).handle, -a.mask.reshape(-1))
    s1 = be.step(1.0)
    be.load(str(tmp_path))
    assert np.array_equal(be.logprobs(a, [0, 1, 2], "current", False).logp, after)
    be.backward(be.logprobs(a, [0, 1, 2], "current", True).handle, -a.mask.reshape(-1))
    assert be.step(1.0) == s1


def test_the_sft_loss_and_its_gradient_equal_qrl_sims():
    from qrl_backend.numpy_diffusion.model import param_specs
    from qrl_backend.numpy_diffusion.sft import masked_diffusion_loss, pad_response
    out = _node("""
      import { createDiffusionModel } from './src/policies/diffusion/model.ts';
      import { maskedDiffusionLoss } from './src/policies/diffusion/warmstart.ts';
      import { createParamStore } from './src/nn/params.ts';
      import { createRng } from './src/core/rng.ts';
      const model = createDiffusionModel({ vocabSize: 13, maxLen: 16, C: 16, H: 2, layers: 1, hidden: 32 });
      const store = createParamStore(model.specs, '5/diffusion-policy');
      const prompts = [[1, 5, 6, 7, 3], [1, 8, 9, 10, 3]];
      const responses = [[7, 6, 5, 2, 2, 2, 2, 2], [10, 9, 8, 2, 2, 2, 2, 2]];
      const grads = new Float32Array(store.data.length);
      const loss = maskedDiffusionLoss(model, store.data, prompts, responses, createRng('5/sft/step-0'), { grads });
      console.log(JSON.stringify({ loss, grads: Array.from(grads) }));""")
    want = json.loads(out)
    params = init_params(CFG, "5/diffusion-policy")
    grads = {k: np.zeros_like(v) for k, v in params.items()}
    prompts = [[1, 5, 6, 7, 3], [1, 8, 9, 10, 3]]
    responses = [pad_response([7, 6, 5, 2], 8), pad_response([10, 9, 8, 2], 8)]
    loss = masked_diffusion_loss(CFG, params, prompts, responses, Rng("5/sft/step-0"), grads=grads)
    assert loss == want["loss"] and loss > 1  # ≈ log 12 at initialization
    flat = np.concatenate([grads[n].reshape(-1) for n, _, _ in param_specs(CFG)])
    assert np.array_equal(flat, np.asarray(want["grads"], dtype=np.float32))
    assert np.abs(flat).max() > 0


def test_without_a_run_it_serves_the_reverse_tasks_defaults_and_a_run_rebuilds_it():
    from qrl_backend.numpy_diffusion.backend import build
    be = build([])
    info = be.info()
    assert info["policy"] == "diffusion" and info["vocabulary"]["size"] == 13 and info["plan"]["name"] == "fp32"
    assert be.inner.sampler == SamplerConfig() and be.inner.estimator == "d1"
    run = {"seed": 1, "policy": {"model": {"C": 16, "H": 2, "layers": 1, "hidden": 32}, "diffusion": {"generationLength": 8, "blockLength": 4, "steps": 4, "estimator": "elbo"}}}
    setup = {"policy": "diffusion", "vocabulary": {"size": 13}, "plan": {"name": "bf16"}, "optim": {"lr": 0.01}}
    be.configure(run, setup)
    assert be.inner.estimator == "elbo" and be.inner.plan_name == "bf16" and be.inner.cfg.C == 16 and be.inner.lr == 0.01


@pytest.mark.parametrize("argv", [["--config", "{bad"], ["--config", '{"policy": {"diffusion": {"blockLength": 5}}}'], ["--config", "[]"], ["--config", '{"policy": {"model": {"bogus": 1}}}']])
def test_a_bad_config_flag_exits_2_with_one_line(argv):
    r = subprocess.run(["python3", "-m", "qrl_backend.numpy_diffusion", *argv], cwd=ROOT, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")},
                       input="", capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith(f"python3 -m qrl_backend.numpy_diffusion: --config {argv[1]}: ")
