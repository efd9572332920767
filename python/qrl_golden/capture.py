"""`python -m qrl_golden.capture trl --out DIR --steps N --options JSON`: TRL's own GRPO steps as qrl-step/1 bundles.

Runs TRL's real `GRPOTrainer` (trl 1.13, pinned in python/requirements.lock) on CPU: a one-layer,
32-wide Llama with random weights, a word-level tokenizer built in code, and qrl-sim's `reverse`
task (docs/tasks.md) with its reward. `JSON` holds GRPOConfig fields; they override the capture's
own settings (`CAPTURE_DEFAULTS`) and both are recorded, as given, in each bundle's `options`.

Nothing of TRL is re-implemented: the bundle holds TRL's own tensors. The locals of
`GRPOTrainer._compute_loss` (per_token_logps, old_per_token_logps, per_token_loss, loss, the
advantages) and of `_generate_and_score_completions` (rewards) are read when those functions
return (a `sys.setprofile` hook, scoped to the call), and d loss / d ℓθ is a tensor hook on TRL's
per_token_logps that fires in TRL's own backward. One bundle per optimizer step, `DIR/<step>/`.

`--plant NAME` plants a bug in TRL for the replay's tests (a trainer that does not do what its
config says); see `PLANTS`. Exit 2 with one line on bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import os
import random
import shutil
import sys
import tempfile
from typing import Any, Callable, Iterator

from . import bundle

#: GRPOConfig fields the capture sets (any of them can be overridden by --options).
CAPTURE_DEFAULTS: dict[str, Any] = {
    "per_device_train_batch_size": 8,
    "num_generations": 4,
    "max_completion_length": 7,
    "learning_rate": 0.05,
    "num_iterations": 2,
    "temperature": 1.0,
    "seed": 0,
    "logging_steps": 1,
    "save_strategy": "no",
    "report_to": "none",
    "use_cpu": True,
    "disable_tqdm": True,
    "dataloader_num_workers": 0,
}

#: The option sets CI captures and replays (`--grid`): every loss type and importance-sampling level
#: of TRL 1.13 the replay maps, a KL term with and without its bias correction, TRL's `delta` cap and
#: the three reward scalings. Each runs `num_iterations` = 2 (CAPTURE_DEFAULTS), so the second step
#: reuses the first step's generation with a moved policy and the clipping binds.
TRL_GRID: dict[str, dict[str, Any]] = {
    "grpo": {"loss_type": "grpo"},
    "dapo": {"loss_type": "dapo", "epsilon_high": 0.28},
    "dr_grpo": {"loss_type": "dr_grpo", "scale_rewards": "none"},
    "bnpo": {"loss_type": "bnpo", "scale_rewards": "batch"},
    "cispo": {"loss_type": "cispo", "epsilon_high": 1.2},
    "gspo": {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4},
    "luspo": {"loss_type": "luspo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4},
    "sapo": {"loss_type": "sapo"},
    "vespo": {"loss_type": "vespo"},
    "grpo-kl": {"loss_type": "grpo", "beta": 0.04},
    "dapo-kl-plain": {"loss_type": "dapo", "beta": 0.04, "use_bias_correction_kl": False},
    "grpo-delta": {"loss_type": "grpo", "delta": 1.5},
    # TRL's vLLM importance-sampling correction on an FP8 rollout engine (Fp8Engine), each mode with a band that binds
    "vllm-token-truncate": {"loss_type": "grpo", "use_vllm": True, "vllm_importance_sampling_mode": "token_truncate", "vllm_importance_sampling_clip_max": 1.001},
    "vllm-token-mask": {"loss_type": "dapo", "use_vllm": True, "vllm_importance_sampling_mode": "token_mask", "vllm_importance_sampling_clip_min": 0.999, "vllm_importance_sampling_clip_max": 1.001},
    "vllm-sequence-truncate": {"loss_type": "bnpo", "use_vllm": True, "vllm_importance_sampling_mode": "sequence_truncate", "vllm_importance_sampling_clip_min": 0.9995, "vllm_importance_sampling_clip_max": 1.0005},
    "vllm-sequence-mask": {"loss_type": "grpo", "use_vllm": True, "beta": 0.04, "vllm_importance_sampling_clip_min": 0.9995, "vllm_importance_sampling_clip_max": 1.0005},
}

#: Fields the capture owns: the runner needs them as they are (one process on CPU, one log per step).
FIXED = {"logging_steps": 1, "use_cpu": True, "report_to": "none", "save_strategy": "no"}

SPECIALS = ["<pad>", "<bos>", "<eos>", "<sep>", "<mask>"]
PAD, BOS, EOS, SEP = 0, 1, 2, 3


class BadInput(Exception):
    """Bad input: one line on stderr, exit 2."""


# --- the task: qrl-sim's `reverse` (docs/tasks.md), problems drawn here ------------------------


def reverse_problems(n: int, seed: int, alphabet: int = 8, min_length: int = 3, max_length: int = 6) -> list[str]:
    """`n` strings over the first `alphabet` letters, lengths uniform in [min, max] (Python's `random`, seeded)."""
    rng = random.Random(seed)
    letters = [chr(ord("a") + k) for k in range(alphabet)]
    return ["".join(rng.choice(letters) for _ in range(rng.randint(min_length, max_length))) for _ in range(n)]


def reverse_reward(answer: str, completion_ids: list[int], first_letter: int = len(SPECIALS)) -> float:
    """docs/tasks.md `reverse`: #{k < min(m, n): o_k = y_k} / max(m, n) over the body before EOS; no EOS scores 0."""
    if EOS not in completion_ids:
        return 0.0
    body = completion_ids[: completion_ids.index(EOS)]
    target = [first_letter + ord(c) - ord("a") for c in answer]
    hits = sum(1 for o, y in zip(body, target) if o == y)
    return hits / max(len(body), len(target))


def tokenizer(alphabet: int = 8):
    """A word-level tokenizer over qrl-sim's specials and the letters (ids as the TypeScript task's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIALS + [chr(ord("a") + k) for k in range(alphabet)])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<mask>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<mask>")


def tiny_llama(vocab_size: int, seed: int):
    """One layer, width 32, random weights from `seed`, float32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config).float()


# --- reading TRL's locals ---------------------------------------------------------------------


@contextlib.contextmanager
def locals_at_return(functions: dict[str, Callable[..., Any]], on_return: Callable[[str, dict[str, Any], Any], None]) -> Iterator[None]:
    """Calls `on_return(name, f_locals, value)` whenever one of `functions` returns inside the block."""
    codes = {inspect.unwrap(f).__code__: name for name, f in functions.items()}
    previous = sys.getprofile()

    def hook(frame, event, arg):  # noqa: ANN001
        if event == "return":
            name = codes.get(frame.f_code)
            if name is not None:
                on_return(name, dict(frame.f_locals), arg)

    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(previous)


# --- an FP8 rollout engine in vLLM's place ---------------------------------------------------


class Fp8Engine:
    """Stands where TRL keeps its `VLLMGeneration` (`trainer.vllm_generation`): the same two calls.

    `sync_weights()` is the refit TRL calls whenever the optimizer step changed: the trainer's
    weights are copied into the engine's own model, every linear weight of the decoder layers through
    vLLM's dynamic per-tensor FP8 E4M3 (`torch_quantizers.vllm_fp8_tensor`, dequantized; embeddings,
    norms and the LM head stay FP32). `generate(prompts, images,
    num_generations, profiler)` samples one completion per prompt id list, as vLLM's colocate mode
    returns them, with the sampled token's log-prob under the engine's own (quantized) model:
    `(prompt_ids, completion_ids, logprobs [[[lp], …], …], logprob_token_ids)`, each completion cut
    after its first EOS. Sampling is torch's, seeded by TRL's `set_seed`.
    """

    def __init__(self, trainer, max_new_tokens: int, temperature: float) -> None:  # noqa: ANN001
        import copy

        self.trainer = trainer
        self.engine = copy.deepcopy(trainer.accelerator.unwrap_model(trainer.model)).eval()
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.syncs = 0

    def sync_weights(self) -> None:
        import torch

        from .torch_quantizers import vllm_fp8_tensor

        source = dict(self.trainer.accelerator.unwrap_model(self.trainer.model).named_parameters())
        with torch.no_grad():
            for name, p in self.engine.named_parameters():
                w = source[name].detach()
                p.copy_(vllm_fp8_tensor(w.float(), {})["dequantized"] if w.dim() == 2 and ".layers." in name else w)
        self.syncs += 1

    def generate(self, prompts, images, num_generations, profiler=None):  # noqa: ANN001, ANN201
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.tensor([[PAD] * (width - len(p)) + list(p) for p in prompts])
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.no_grad():
            out = self.engine.generate(
                input_ids=ids, attention_mask=attention, do_sample=True, max_new_tokens=self.max_new_tokens,
                temperature=self.temperature, top_k=0, top_p=1.0, pad_token_id=PAD, eos_token_id=EOS,
                output_logits=True, return_dict_in_generate=True,
            )
        logits = torch.stack(out.logits, dim=1).float() / self.temperature
        logp = torch.log_softmax(logits, dim=-1)
        completion_ids, logprobs = [], []
        for row in range(len(prompts)):
            tokens = out.sequences[row, width:].tolist()
            if EOS in tokens:
                tokens = tokens[: tokens.index(EOS) + 1]
            completion_ids.append(tokens)
            logprobs.append([[logp[row, t, tok].item()] for t, tok in enumerate(tokens)])
        return [list(p) for p in prompts], completion_ids, logprobs, [[[t] for t in c] for c in completion_ids]


# --- planted bugs -----------------------------------------------------------------------------


def _plant_advantage_no_std(trainer) -> Callable[[], None]:
    import trl.trainer.grpo_trainer as g
    import torch

    original = g.nanstd
    g.nanstd = lambda t, dim=None, keepdim=False: torch.ones_like(torch.nanmean(t, dim=dim, keepdim=keepdim) if dim is not None else torch.nanmean(t))

    def undo() -> None:
        g.nanstd = original

    return undo


def _plant_epsilon_high_ignored(trainer) -> None:
    trainer.epsilon_high = trainer.epsilon_low


def _plant_bnpo_aggregation(trainer) -> None:
    trainer.loss_type = "bnpo"


def _plant_is_cap_ignored(trainer) -> None:
    trainer.vllm_importance_sampling_clip_max = math.inf


def _plant_kl_unscaled(trainer) -> None:
    trainer.beta = 2 * trainer.beta


#: Planted bugs: name → (the patch, returning its undo or None; what the patched TRL does instead of what its
#: config says; the stage that must catch it; the options it is captured with by --grid).
PLANTS: dict[str, tuple[Callable[[Any], Callable[[], None] | None], str, str, dict[str, Any]]] = {
    "advantage-no-std": (_plant_advantage_no_std, "scale_rewards='group' but advantages are not divided by the group std", "advantages", {"loss_type": "grpo"}),
    "epsilon-high-ignored": (_plant_epsilon_high_ignored, "epsilon_high is ignored: the upper clip uses epsilon", "token-loss", {"loss_type": "dapo", "epsilon_high": 0.28}),
    "bnpo-aggregation": (_plant_bnpo_aggregation, "loss_type='grpo' but the loss is reduced as bnpo (one token mean over the batch)", "aggregation", {"loss_type": "grpo"}),
    "kl-doubled": (_plant_kl_unscaled, "the KL term is added with 2·beta", "token-loss", {"loss_type": "grpo", "beta": 0.04}),
    "is-cap-ignored": (_plant_is_cap_ignored, "vllm_importance_sampling_clip_max is ignored: the ratio is not truncated", "correction", TRL_GRID["vllm-token-truncate"]),
}


# --- the capture ------------------------------------------------------------------------------


def capture_trl(out: str, steps: int, options: dict[str, Any], plant: str | None = None, alphabet: int = 8) -> list[str]:
    """Runs `steps` optimizer steps of TRL's GRPOTrainer and writes `out/<step>/` for each; returns the paths.

    `options` may say `"use_vllm": true`: the trainer is then built without vLLM (which does not
    install here) and handed an `Fp8Engine` where it keeps its vLLM generation, so TRL's own
    vLLM importance-sampling correction (`vllm_importance_sampling_*`) runs on FP8 rollout log-probs.
    """
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    import transformers
    import trl
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    torch.use_deterministic_algorithms(True)
    given = {**CAPTURE_DEFAULTS, **options, **FIXED}
    engine_in_vllms_place = bool(given.get("use_vllm"))
    if plant is not None and plant not in PLANTS:
        raise BadInput(f"--plant: unknown bug '{plant}' (known: {', '.join(PLANTS)})")
    seed = int(given.get("seed", 0))
    tok = tokenizer(alphabet)
    strings = reverse_problems(64, seed, alphabet)
    dataset = Dataset.from_dict({
        "prompt": ["<bos> " + " ".join(s) + " <sep>" for s in strings],
        "answer": [s[::-1] for s in strings],
    })

    def reverse_task(prompts, completions, completion_ids, answer, **_):  # noqa: ANN001
        return [reverse_reward(a, list(ids)) for a, ids in zip(answer, completion_ids)]

    workdir = tempfile.mkdtemp(prefix="qrl-capture-")
    try:
        config = GRPOConfig(output_dir=workdir, max_steps=steps, **{**given, "use_vllm": False})
    except (TypeError, ValueError) as error:
        raise BadInput(f"--options: GRPOConfig refuses them: {str(error).splitlines()[0]}") from None
    if config.gradient_accumulation_steps != 1 or config.steps_per_generation != 1:
        raise BadInput("--options: gradient_accumulation_steps and steps_per_generation must be 1 (one loss evaluation per bundle)")

    pending: dict[str, Any] = {}
    written: list[str] = []
    os.makedirs(out, exist_ok=True)

    class Capturing(GRPOTrainer):
        def _generate_and_score_completions(self, inputs):  # noqa: ANN001
            seen: dict[str, Any] = {}
            with locals_at_return({"g": GRPOTrainer._generate_and_score_completions}, lambda n, loc, v: seen.update(loc)):
                output = super()._generate_and_score_completions(inputs)
            rows = output["completion_ids"].shape[0]
            output["qrl_row"] = torch.arange(rows)
            output["qrl_rewards"] = seen["rewards"].detach().clone()
            return output

        def _compute_loss(self, model, inputs):  # noqa: ANN001
            seen: dict[str, Any] = {}
            grads: dict[str, Any] = {}

            def on_return(name: str, loc: dict[str, Any], value: Any) -> None:
                if name == "loss":
                    seen.update(loc)
                elif name == "logps" and torch.is_grad_enabled() and value[0].requires_grad and "logp" not in grads:
                    grads["logp"] = value[0]
                    value[0].register_hook(lambda g: grads.__setitem__("grad", g.detach().clone()))

            with locals_at_return({"loss": GRPOTrainer._compute_loss, "logps": GRPOTrainer._get_per_token_logps_and_entropies}, on_return):
                loss = super()._compute_loss(model, inputs)
            pending.clear()
            pending.update(locals=seen, inputs=inputs, grads=grads)
            return loss

    # saved and passed by path, as a user passes a hub id: TRL then loads its reference model (beta ≠ 0) the same way
    model_dir = os.path.join(workdir, "tiny-llama")
    tiny_llama(len(SPECIALS) + alphabet, seed).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    trainer = Capturing(model=model_dir, reward_funcs=[reverse_task], args=config, train_dataset=dataset, processing_class=tok)

    class Writer(transformers.TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if not pending or "loss" not in pending["locals"]:
                return
            loc, inp = pending["locals"], pending["inputs"]
            rows = inp["qrl_row"]
            G = config.num_generations
            mask = loc["mask"]
            tensors: dict[str, Any] = {
                "prompt_ids": inp["prompt_ids"], "prompt_mask": inp["prompt_mask"],
                "completion_ids": inp["completion_ids"], "completion_mask": inp["completion_mask"],
                "group": rows // G, "rewards": inp["qrl_rewards"],
                "advantages": loc["advantages"].squeeze(-1) if loc["advantages"].dim() == 2 and loc["advantages"].shape[1] == 1 else loc["advantages"],
                "logp": loc["per_token_logps"],
                "token_loss": loc["per_token_loss"], "loss": loc["loss"], "grad_logp": pending["grads"]["grad"],
            }
            if not torch.equal(mask, inp["completion_mask"]):
                tensors["loss_mask"] = mask
            if inp.get("old_per_token_logps") is not None:
                tensors["logp_old"] = inp["old_per_token_logps"]
            if inp.get("sampling_per_token_logps") is not None:
                tensors["logp_rollout"] = inp["sampling_per_token_logps"]
            if inp.get("ref_per_token_logps") is not None:
                tensors["logp_ref"] = inp["ref_per_token_logps"]
            if inp.get("importance_sampling_ratio") is not None:
                tensors["is_weight"] = inp["importance_sampling_ratio"]
            metrics = {k: v for k, v in (logs or {}).items() if isinstance(v, (int, float))}
            step = state.global_step - 1
            path = bundle.write(
                os.path.join(out, str(step)), stack="trl", version=trl.__version__, options=given, tensors=tensors,
                metrics=metrics, step=step,
                extra={"capture": {"plant": plant, "rollout": "Fp8Engine in vLLM's place (per-tensor FP8 E4M3 decoder weights)" if engine_in_vllms_place else "TRL's transformers generate", "torch": torch.__version__, "transformers": transformers.__version__, "task": "reverse", "alphabet": alphabet}},
            )
            written.append(path)
            pending.clear()

    trainer.add_callback(Writer())
    # the bundle holds the logs; stdout carries the bundle paths alone
    trainer.remove_callback(transformers.PrinterCallback)
    if engine_in_vllms_place:
        # what GRPOTrainer.__init__ does with use_vllm (grpo_trainer.py l.1089–1124), an Fp8Engine for VLLMGeneration
        trainer.use_vllm = True
        trainer.vllm_generation = Fp8Engine(trainer, config.max_completion_length, config.temperature)
        trainer._last_loaded_step = -1
    undo = PLANTS[plant][0](trainer) if plant is not None else None
    try:
        trainer.train()
    finally:
        if undo is not None:
            undo()
        shutil.rmtree(workdir, ignore_errors=True)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qrl_golden.capture", description=__doc__.splitlines()[0])
    parser.add_argument("stack", help="the stack to run (trl)")
    parser.add_argument("--out", required=True, help="directory of the bundles, one per step (DIR/<step>/)")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps to run (default 2)")
    parser.add_argument("--options", default="{}", help="GRPOConfig fields as a JSON object")
    parser.add_argument("--plant", default=None, help=f"plant a bug in TRL for tests: {', '.join(PLANTS)}")
    parser.add_argument("--grid", action="store_true", help="capture every option set of TRL_GRID into DIR/<name>/ and every planted bug into DIR/plant-<name>/ (--options and --plant are not taken)")
    args = parser.parse_args(argv)
    try:
        if args.stack != "trl":
            raise BadInput(f"stack: unsupported '{args.stack}' (supported: trl)")
        if args.steps < 1:
            raise BadInput(f"--steps: must be at least 1, got {args.steps}")
        try:
            options = json.loads(args.options)
        except ValueError as error:
            raise BadInput(f"--options: not JSON ({error})") from None
        if not isinstance(options, dict):
            raise BadInput(f"--options: expected a JSON object of GRPOConfig fields, got {args.options}")
        if args.plant is not None and args.plant not in PLANTS:
            raise BadInput(f"--plant: unknown bug '{args.plant}' (known: {', '.join(PLANTS)})")
        clash = sorted(k for k in options if k in FIXED and options[k] != FIXED[k])
        if clash:
            raise BadInput(f"--options: {clash[0]} is set by the capture ({FIXED[clash[0]]!r})")
        if args.grid:
            if options or args.plant is not None:
                raise BadInput("--grid: takes neither --options nor --plant (the grid names its own)")
            paths = []
            for name, grid_options in TRL_GRID.items():
                paths += capture_trl(os.path.join(args.out, name), args.steps, grid_options)
            for name, (_, _, _, plant_options) in PLANTS.items():
                paths += capture_trl(os.path.join(args.out, f"plant-{name}"), args.steps, plant_options, plant=name)
        else:
            paths = capture_trl(args.out, args.steps, options, args.plant)
    except (BadInput, bundle.BundleError) as error:
        print(f"capture: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        print(f"capture: needs {error.name}, which is not installed: pip install 'qrl-sim-python[trl]' (trl 1.13 with torch, transformers, accelerate, datasets)", file=sys.stderr)
        return 1
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
