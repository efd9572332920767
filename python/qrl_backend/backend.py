"""The Backend base class of qrl-backend/1: one method per protocol method, taking and returning numpy
arrays and plain Python values. A GPU stack subclasses it and fills in the methods; the server
(server.py) validates params and encodes results. Not a transport and not a model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, FrozenSet, List, Optional, Sequence

import numpy as np

from .wire import FAILED_PRECONDITION, PROTOCOL, ProtocolError, RolloutBatch, RpcError


#: The keyword arguments `Backend.logprobs` may take beyond (batch, rows, policy, grad), and the wire field of each.
LOGPROBS_KEYWORDS: Dict[str, str] = {"routing": "routing", "return_routing": "returnRouting", "prob_sq_sum": "probSqSum", "topk": "topk"}
#: The optional keyword arguments of `Backend.generate`, each with the request field it comes from.
GENERATE_KEYWORDS: Dict[str, str] = {"max_new_tokens": "maxNewTokens", "topk_logprobs": "topkLogprobs"}
#: The optional keyword arguments of `Backend.backward`, each with the request field it comes from.
BACKWARD_KEYWORDS: Dict[str, str] = {"grad_topk": "gradTopk"}
#: The keywords that need `capabilities.topkLogprobs` (the server refuses them to a backend not declaring it).
TOPK_KEYWORDS: FrozenSet[str] = frozenset({"topk_logprobs", "topk", "grad_topk"})
#: The optional keyword arguments of `Backend.warm_start`, each with the request field it comes from.
WARM_START_KEYWORDS: Dict[str, str] = {"examples": "examples"}


@dataclass
class LogprobsResult:
    """What `Backend.logprobs` returns (a plain `(logp, entropy, handle)` tuple is accepted too).

    Read by field name (it does not unpack as a tuple: `LogprobsResult.of` converts a legacy tuple).
    logp: float64 (len(rows), T), 0 off the mask; entropy: float64 (len(rows), T), or None when the
    backend declares capabilities.entropy = false; handle: set when grad was asked; routing (MoE, when
    return_routing): one int32 (len(rows), S, k) array per layer; routing_flip_rate (MoE): per layer,
    the share of router decisions that differ from the record's; prob_sq_sum (when prob_sq_sum was
    asked): float64 (len(rows), T), Σ_v π(v)² of the softmax row each log-prob was taken from, 0 off
    the mask (veRL's sum_pi_squared, for the optimal token baseline); topk_logp (when topk was asked,
    capabilities.topkLogprobs): float64 (len(rows), T, K), the trainer's ℓ at the batch's top-k ids from
    the same softmax row as logp, 0 at an empty slot (id −1) and off the mask.
    """

    logp: np.ndarray
    entropy: Optional[np.ndarray] = None
    handle: Optional[str] = None
    routing: Optional[List[np.ndarray]] = None
    routing_flip_rate: Optional[List[float]] = None
    prob_sq_sum: Optional[np.ndarray] = None
    topk_logp: Optional[np.ndarray] = None

    # No __iter__ / __getitem__: a result that unpacked as (logp, entropy, handle) hid its other three fields.
    # Read the fields by name; `LogprobsResult.of` turns a backend's legacy tuple into one.

    @classmethod
    def of(cls, out: Any) -> "LogprobsResult":
        """A backend's `logprobs` return as a LogprobsResult: itself, or the legacy (logp, entropy, handle) tuple."""
        if isinstance(out, cls):
            return out
        logp, entropy, handle = out
        return cls(logp, entropy, handle)


@dataclass
class StepResult:
    """What `Backend.step` returns (a {"gradNorm", "weightVersion"} dict is accepted too): the global
    gradient norm before clipping and the trainer's weight version after the step."""

    grad_norm: float
    weight_version: int


@dataclass
class SftExamples:
    """`warmStart.examples` (capabilities.sftExamples): N = steps · batchSize supervised pairs in training order
    (step s trains on rows s·batchSize … (s+1)·batchSize − 1), the pairs qrl-sim's own warm start draws.
    `prompts` int32 (N, P); `responses` int32 (N, L), row i's first `lengths[i]` tokens the gold response
    (EOS included), PAD after; `lengths` int32 (N)."""

    prompts: np.ndarray
    responses: np.ndarray
    lengths: np.ndarray


class Backend:
    """Base class of a policy backend. Override every method a backend supports; the defaults refuse
    with a failed-precondition error naming the method. Methods are called one at a time.

    Arrays: `generate` returns a RolloutBatch; `logprobs` returns (logp, entropy, handle) with logp and
    entropy float64 (len(rows), T); `backward` gets a float64 gradient of shape (len(rows)·T,).
    """

    protocol = PROTOCOL

    def configure(self, run: Optional[Dict[str, Any]], setup: Optional[Dict[str, Any]]) -> None:
        """Called before `info` when the client sends its run: `run` is the driver's resolved run config
        (qrl-sim's own JSON), `setup` the same in the protocol's terms — {policy, vocabulary, plan?:
        {name, rollout, trainer}, promptLength, maxNewTokens, sampling, optim: {lr, beta1, beta2, eps,
        weightDecay}, model?} (docs/adapter.md §5). A backend that builds its policy from the run does
        it here (command-line flags override); the default ignores both. Raise ProtocolError naming
        `setup.<field>` for a value it cannot serve. May be called again with the same values."""

    def info(self) -> Dict[str, Any]:
        """{backend: {name, version}, policy, vocabulary, plan, capabilities, parameters} (protocol is added)."""
        raise RpcError(FAILED_PRECONDITION, "info: not implemented")

    def sync(self) -> int:
        """Rebuilds the rollout engine from the trainer's weights; returns the weight version it serves."""
        raise RpcError(FAILED_PRECONDITION, "sync: not implemented")

    #: The keyword arguments of GENERATE_KEYWORDS this backend's `generate` takes. Like `logprobs_keywords`:
    #: declared next to the `generate` it describes; a subclass overriding `generate` without declaring again
    #: has them read from its signature instead, once per class.
    generate_keywords: ClassVar[Optional[FrozenSet[str]]] = frozenset({"max_new_tokens"})

    def generate(self, prompts: List[List[int]], seed: str, sampling: Optional[Dict[str, Any]], greedy: bool, side: str,
                 max_new_tokens: Optional[int] = None) -> RolloutBatch:
        """Samples one response per prompt with `sampling` ({temperature, topK, topP, logprob}; None: the
        backend's own sampler) and at most `max_new_tokens` response tokens (None: the backend's limit).
        The run driver always sends both. A backend declaring capabilities.topkLogprobs takes the keyword
        `topk_logprobs` K (passed only when the request sets it) and fills RolloutBatch.topk (not for greedy),
        with the same tokens and ℓroll as without it."""
        raise RpcError(FAILED_PRECONDITION, "generate: not implemented")

    #: The keyword arguments of LOGPROBS_KEYWORDS this backend's `logprobs` takes, e.g.
    #: frozenset({"prob_sq_sum"}). The server passes a requested one only when it is listed here and refuses a
    #: request using another, naming its field. Declared next to the `logprobs` it describes: a subclass that
    #: overrides `logprobs` without declaring again (a backend written before this declaration) has its
    #: keywords read from the signature of its `logprobs` instead, once per class. The base declares none.
    logprobs_keywords: ClassVar[Optional[FrozenSet[str]]] = frozenset()

    def logprobs(self, batch: RolloutBatch, rows: Sequence[int], policy: str, grad: bool, *,
                 routing: Any = None, return_routing: bool = False, prob_sq_sum: bool = False, topk: bool = False):
        """Trainer-side log-probs of `rows` → LogprobsResult (or a (logp, entropy, handle) tuple).

        Keyword arguments (each passed only when the request uses it, and only when listed in
        `logprobs_keywords`): `routing` (MoE: "rollout", or one int32 (len(rows), S, k) array per layer:
        replay these experts), `return_routing` (MoE: fill LogprobsResult.routing and
        routing_flip_rate), `prob_sq_sum` (a backend declaring capabilities.probSqSum: fill
        LogprobsResult.prob_sq_sum), `topk` (capabilities.topkLogprobs, on a batch with `topk`: fill
        LogprobsResult.topk_logp; a handle taken with it accepts `grad_topk` in `backward`)."""
        raise RpcError(FAILED_PRECONDITION, "logprobs: not implemented")

    #: The keyword arguments of BACKWARD_KEYWORDS this backend's `backward` takes (like `logprobs_keywords`).
    backward_keywords: ClassVar[Optional[FrozenSet[str]]] = frozenset()

    def backward(self, handle: str, grad_logp: np.ndarray, *, grad_topk: Optional[np.ndarray] = None) -> None:
        """Accumulates d(Σ grad_logp·ℓ)/dθ for the handle's pass and spends the handle. With `grad_topk`
        (capabilities.topkLogprobs; float64 (len(rows)·T·K,), for a handle taken with `topk`) it accumulates
        d(Σ grad_logp·ℓ + Σ grad_topk·ℓ_topk)/dθ."""
        raise RpcError(FAILED_PRECONDITION, "backward: not implemented")

    def step(self, max_grad_norm: float) -> Dict[str, Any]:
        """Clips, steps the optimizer, zeroes the gradients: {gradNorm, weightVersion}."""
        raise RpcError(FAILED_PRECONDITION, "step: not implemented")

    def set_reference(self) -> None:
        raise RpcError(FAILED_PRECONDITION, "setReference: not implemented")

    #: The keyword arguments of WARM_START_KEYWORDS this backend's `warm_start` takes (like `logprobs_keywords`).
    warm_start_keywords: ClassVar[Optional[FrozenSet[str]]] = frozenset()

    def warm_start(self, task: Dict[str, Any], steps: int, batch_size: int, lr: float, seed: int) -> Dict[str, float]:
        """`steps` supervised steps (capabilities.warmStart). A backend declaring capabilities.sftExamples adds
        the keyword `examples: Optional[SftExamples]` (passed only when the request carries it)."""
        raise RpcError(FAILED_PRECONDITION, "warmStart: this backend has no warm start (capabilities.warmStart is false)", "method")

    def save(self, directory: str) -> None:
        raise RpcError(FAILED_PRECONDITION, "save: not implemented")

    def load(self, directory: str) -> None:
        raise RpcError(FAILED_PRECONDITION, "load: not implemented")

    def dump_engine(self, directory: str) -> Dict[str, Any]:
        """Writes the rollout engine's weights since the last sync and the trainer's state dict in
        refit-check's format under `directory` (docs/refit-check.md §8): {trainer, engine, recipe,
        block?, ignore, match}. Only called when the backend declares capabilities.dumpEngine."""
        raise RpcError(FAILED_PRECONDITION, "dumpEngine: this backend has no engine dump (capabilities.dumpEngine is false)", "method")

    def close(self) -> None:
        """Releases resources at shutdown."""


class ConfiguredFromRun(Backend):
    """A backend that builds its real backend from what the driver sends (`configure`), as the
    reference backends do: `self.inner` is that backend once built (or given), and every call goes to
    it. Until then each call is a failed precondition naming `setup`. Subclasses implement
    `configure`, setting `self.inner` and `self.setup`; `flags` are their command-line overrides
    (`flags.fixed`: a backend built from its flags keeps them whatever the run sends)."""

    #: The `setup.policy` the backend serves.
    policy = "ar"

    def __init__(self, flags: Any, inner: Optional[Backend] = None):
        self.flags = flags
        self.inner = inner
        self.setup: Optional[Dict[str, Any]] = None

    def needs_build(self, setup: Optional[Dict[str, Any]]) -> bool:
        """Whether `configure(setup)` has to build the inner backend: not without a setup, not again for
        the setup it was built from, nor over fixed flags; another run's setup on a configured backend
        is a failed precondition, another policy a protocol error naming `setup.policy`."""
        if setup is None:
            return False
        if self.inner is not None:
            if self.setup is not None and setup != self.setup:
                raise RpcError(FAILED_PRECONDITION, "info: this backend was already configured by another run's setup", "setup")
            if self.setup is not None or self.flags.fixed:
                return False
        if setup.get("policy") != self.policy:
            raise ProtocolError("setup.policy", f"this backend serves policy {self.policy!r}, the run asks for {setup.get('policy')!r}")
        return True

    def _be(self) -> Any:
        if self.inner is None:
            raise RpcError(FAILED_PRECONDITION, "this backend builds its model from the run: send info with params.setup (qrl-sim run --backend does), or start it with --config JSON or --weights FILE", "setup")
        return self.inner

    def info(self) -> Dict[str, Any]:
        return self._be().info()

    def sync(self) -> int:
        return self._be().sync()

    def keywords_owner(self) -> Backend:
        """The backend whose declared keywords the server checks a request against: the inner one once built."""
        return self.inner if self.inner is not None else self

    generate_keywords = frozenset({"max_new_tokens"})

    def generate(self, prompts, seed, sampling, greedy, side, max_new_tokens=None, **kw):  # noqa: ANN001, ANN201
        return self._be().generate(prompts, seed, sampling, greedy, side, max_new_tokens, **kw)

    def logprobs(self, batch, rows, policy, grad, prob_sq_sum=False, **kw):  # noqa: ANN001, ANN201
        # prob_sq_sum passed always (inner backends written before the keyword declarations take it)
        return self._be().logprobs(batch, rows, policy, grad, prob_sq_sum=prob_sq_sum, **kw)

    def backward(self, handle, grad_logp, **kw):  # noqa: ANN001, ANN201
        return self._be().backward(handle, grad_logp, **kw)

    def step(self, max_grad_norm):  # noqa: ANN001, ANN201
        return self._be().step(max_grad_norm)

    def set_reference(self):  # noqa: ANN201
        return self._be().set_reference()

    def save(self, directory):  # noqa: ANN001, ANN201
        return self._be().save(directory)

    def load(self, directory):  # noqa: ANN001, ANN201
        return self._be().load(directory)
