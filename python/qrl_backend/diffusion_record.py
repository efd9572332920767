"""The masked-diffusion policy's replay record as typed objects: `DiffusionEngineRecord` {kind,
sequences, estimator, estimatorSeed, temperature, support?, moeRouting?} and its per-sequence
`DiffusionSequence` {id, prompt, response, commitStep}, with the wire codec (`to_json`/`from_json`,
each error naming its `batch.record.…` field) and the replay of the states the sampler visited
(`state_at`). docs/adapter.md "The diffusion record"; the JSON Schema is `records.diffusion` of
docs/qrl-backend-1.schema.json. Not a sampler or an estimator (numpy_diffusion)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .wire import ProtocolError, decode_tensor, encode_tensor, is_wire_tensor

#: The three per-token log-prob estimators of the diffusion policy (docs/policies-diffusion.md).
ESTIMATORS = ("trajectory", "d1", "elbo")


@dataclass
class DiffusionSequence:
    """One sampled sequence. id: the row stream's path (it seeds the d1 and ELBO views with the record's
    estimator_seed); prompt (P) and response (N, every committed slot, past EOS too) as int lists;
    commit_step: int32 (N), the global sampler step that committed each slot, or None for a sequence
    that was not sampled (trajectory cannot score it)."""

    id: str
    prompt: List[int]
    response: List[int]
    commit_step: Optional[np.ndarray]

    def to_json(self) -> Dict[str, Any]:
        cs = None if self.commit_step is None else encode_tensor(np.asarray(self.commit_step, dtype=np.int32).reshape(-1))
        return {"id": self.id, "prompt": [int(t) for t in self.prompt], "response": [int(t) for t in self.response], "commitStep": cs}

    @classmethod
    def from_json(cls, v: Any, field: str) -> "DiffusionSequence":
        if not isinstance(v, dict):
            raise ProtocolError(field, "expected a sequence object {id, prompt, response, commitStep}")
        for k in v:
            if k not in ("id", "prompt", "response", "commitStep"):
                raise ProtocolError(f"{field}.{k}", "unknown field")
        for k in ("id", "prompt", "response", "commitStep"):
            if k not in v:
                raise ProtocolError(f"{field}.{k}", "required")
        if not isinstance(v["id"], str) or v["id"] == "":
            raise ProtocolError(f"{field}.id", f"expected a non-empty string, got {v['id']!r}")
        toks = {}
        for k in ("prompt", "response"):
            t = v[k]
            if not isinstance(t, list) or any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in t):
                raise ProtocolError(f"{field}.{k}", "expected a list of token ids (integers ≥ 0)")
            toks[k] = list(t)
        cs = v["commitStep"]
        if cs is not None:
            if isinstance(cs, np.ndarray):
                arr = cs
            else:
                arr = decode_tensor(cs, f"{field}.commitStep", ("I32",))
            arr = np.asarray(arr, dtype=np.int32).reshape(-1)
            if arr.size != len(toks["response"]):
                raise ProtocolError(f"{field}.commitStep", f"must hold one step per response slot ({len(toks['response'])}), got {arr.size}")
            if arr.size and arr.min() < 0:
                raise ProtocolError(f"{field}.commitStep", "steps must be ≥ 0")
            cs = arr
        return cls(v["id"], toks["prompt"], toks["response"], cs)


@dataclass
class DiffusionEngineRecord:
    """What a diffusion batch carries in `record` (TypeScript `DiffusionEngineRecord`,
    src/policies/diffusion/engine.ts): the sequences with their commit steps, the estimator both sides
    run, its seed (the generate request's seed), the τ of every log-prob, and optionally the kept sets
    of the committing draws (support, uint8 (B, N, V)) and an MoE model's rollout routing (one int32
    array per layer, kept flat as it crossed the wire)."""

    sequences: List[DiffusionSequence]
    estimator: str
    estimator_seed: str
    temperature: float
    support: Optional[np.ndarray] = None
    moe_routing: Optional[List[np.ndarray]] = None
    kind: str = field(default="diffusion")

    @property
    def B(self) -> int:
        return len(self.sequences)

    @property
    def N(self) -> int:
        return len(self.sequences[0].response) if self.sequences else 0

    def state_at(self, row: int, step: int, mask_id: int) -> np.ndarray:
        """The canvas (P + N) the model saw at global sampler step `step` in row `row`: the prompt, then
        response[j] where commit_step[j] < step and `mask_id` elsewhere (so no state needs storing)."""
        s = self.sequences[row]
        if s.commit_step is None:
            raise ValueError(f"sequence {row} was not sampled: it has no commit steps")
        resp = np.asarray(s.response, dtype=np.int32)
        shown = np.where(np.asarray(s.commit_step) < step, resp, mask_id)
        return np.concatenate([np.asarray(s.prompt, dtype=np.int32), shown.astype(np.int32)])

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "kind": "diffusion",
            "sequences": [s.to_json() for s in self.sequences],
            "estimator": self.estimator,
            "estimatorSeed": self.estimator_seed,
            "temperature": float(self.temperature),
        }
        if self.support is not None:
            out["support"] = encode_tensor(np.asarray(self.support, dtype=np.uint8).reshape(-1))
        if self.moe_routing is not None:
            out["moeRouting"] = [encode_tensor(np.asarray(r, dtype=np.int32).reshape(-1)) for r in self.moe_routing]
        return out

    @classmethod
    def from_json(cls, v: Any, field: str = "batch.record", vocab_size: Optional[int] = None) -> "DiffusionEngineRecord":
        """Decodes and checks a diffusion record, from its JSON form or from the generic decoded form
        (`wire.record_from_json`: tensors already numpy arrays). Every error names its field."""
        if not isinstance(v, dict):
            raise ProtocolError(field, "expected an object")
        if v.get("kind") != "diffusion":
            raise ProtocolError(f"{field}.kind", f"expected 'diffusion', got {v.get('kind')!r}")
        allowed = ("kind", "sequences", "estimator", "estimatorSeed", "temperature", "support", "moeRouting")
        for k in v:
            if k not in allowed:
                raise ProtocolError(f"{field}.{k}", "unknown field")
        for k in ("sequences", "estimator", "estimatorSeed", "temperature"):
            if k not in v:
                raise ProtocolError(f"{field}.{k}", "required")
        seqs = v["sequences"]
        if not isinstance(seqs, list) or not seqs:
            raise ProtocolError(f"{field}.sequences", "expected a non-empty list of sequences")
        sequences = [DiffusionSequence.from_json(s, f"{field}.sequences.{i}") for i, s in enumerate(seqs)]
        N = len(sequences[0].response)
        for i, s in enumerate(sequences):
            if len(s.response) != N:
                raise ProtocolError(f"{field}.sequences.{i}.response", f"every response must have N = {N} slots, got {len(s.response)}")
        if v["estimator"] not in ESTIMATORS:
            raise ProtocolError(f"{field}.estimator", f"expected one of {', '.join(ESTIMATORS)}, got {v['estimator']!r}")
        if not isinstance(v["estimatorSeed"], str) or v["estimatorSeed"] == "":
            raise ProtocolError(f"{field}.estimatorSeed", f"expected a non-empty string, got {v['estimatorSeed']!r}")
        tau = v["temperature"]
        if not isinstance(tau, (int, float)) or isinstance(tau, bool) or not np.isfinite(tau) or tau <= 0:
            raise ProtocolError(f"{field}.temperature", f"expected a finite number > 0, got {tau!r}")
        support = None
        if v.get("support") is not None:
            sup = v["support"]
            sup = sup if isinstance(sup, np.ndarray) else decode_tensor(sup, f"{field}.support", ("U8",))
            sup = np.asarray(sup, dtype=np.uint8).reshape(-1)
            if not np.all((sup == 0) | (sup == 1)):
                raise ProtocolError(f"{field}.support", "must hold 0 or 1")
            BN = len(sequences) * N
            if BN == 0 or sup.size % BN or (vocab_size is not None and sup.size != BN * vocab_size):
                want = f"B·N·V = {BN * vocab_size}" if vocab_size is not None else f"a multiple of B·N = {BN}"
                raise ProtocolError(f"{field}.support", f"must hold {want} entries, got {sup.size}")
            support = sup.reshape(len(sequences), N, sup.size // BN)
        routing = None
        if v.get("moeRouting") is not None:
            mr = v["moeRouting"]
            if not isinstance(mr, list):
                raise ProtocolError(f"{field}.moeRouting", "expected a list of I32 tensors, one per layer")
            routing = [r if isinstance(r, np.ndarray) else decode_tensor(r, f"{field}.moeRouting.{i}", ("I32",)) for i, r in enumerate(mr)]
        return cls(sequences, v["estimator"], v["estimatorSeed"], float(tau), support, routing)


def diffusion_record(batch_record: Any, field: str = "batch.record", vocab_size: Optional[int] = None) -> DiffusionEngineRecord:
    """The typed record of a decoded batch (`RolloutBatch.record`): itself when already typed."""
    if isinstance(batch_record, DiffusionEngineRecord):
        return batch_record
    return DiffusionEngineRecord.from_json(batch_record, field, vocab_size)


def completion_mask(responses: Sequence[Sequence[int]], eos: int) -> np.ndarray:
    """d1's completion mask (B, N): 1 up to and including the first EOS of each row, all 1 without EOS."""
    out = np.zeros((len(responses), len(responses[0]) if responses else 0))
    for r, resp in enumerate(responses):
        for j, t in enumerate(resp):
            out[r, j] = 1.0
            if t == eos:
                break
    return out
