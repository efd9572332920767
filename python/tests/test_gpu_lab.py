"""`python -m qrl_backend.hf.gpu_lab` without a GPU: its argument handling, the commands of a dry run (every
backend on --device cuda with a fixed cuBLAS workspace, the lab's without a plan, which the lab appends per
run), a budget that runs nothing (exit 1), and the table row read from a run directory."""

from __future__ import annotations

import json
import os

import pytest

from qrl_backend.hf import gpu_lab


def test_dry_run_prints_every_command(capsys, tmp_path):
    assert gpu_lab.main(["--dry-run", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    assert [line.split()[0] for line in lines] == ["[warm]"] * 3 + ["[length]"]
    for line in lines:
        assert "--device cuda" in line and "CUBLAS_WORKSPACE_CONFIG=:4096:8" in line and '"hidden_size":256' in line
    assert "--plan hf-fp8-rollout" in lines[1] and "--set sft.steps=300" in lines[1]
    assert "lab run length --seeds 1" in lines[3] and "--plan" not in lines[3]
    assert not os.listdir(tmp_path)  # a dry run writes nothing


def test_tiny_size_is_the_smoke_version(capsys, tmp_path):
    assert gpu_lab.main(["--dry-run", "--size", "tiny", "--device", "cpu", "--only", "length", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "lab run length --smoke --seeds 1" in out and "--device cpu" in out and "CUBLAS" not in out


@pytest.mark.parametrize("argv", [["--device", "tpu"], ["--budget-s", "0"], ["--only", "warm,nope"], ["--plans", "bf16"], ["--size", "huge"]])
def test_bad_arguments_exit_2(argv):
    with pytest.raises(SystemExit) as e:
        gpu_lab.parse(argv)
    assert e.value.code == 2


def test_a_spent_budget_runs_nothing(capsys, tmp_path):
    assert gpu_lab.main(["--size", "tiny", "--device", "cpu", "--budget-s", "0.5", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.count("skipped: the budget is spent") == 4 and not os.listdir(tmp_path)


def test_warm_row_reads_a_run(tmp_path):
    def write(name, rows):
        with open(tmp_path / name, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))

    write("eval.jsonl", [{"step": 0, "eval/rollout/greedy_accuracy": 0.875}, {"step": 2, "eval/rollout/greedy_accuracy": 0.5}])
    write("metrics.jsonl", [{"rollout_corr/k3_kl": 1e-6}, {"rollout_corr/k3_kl": 3e-6}])
    write("timings.jsonl", [{"total": 0.2}, {"total": 0.4}])
    assert gpu_lab.warm_row("hf-fp8-rollout", str(tmp_path)) == "| hf-fp8-rollout | 0.875 | 0.500 | 2.00e-06 | 0.300 |"
