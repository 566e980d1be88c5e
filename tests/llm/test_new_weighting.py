"""A new weighting is one ``Rule`` defined here, in the test file only: the trainer trains with it
and the dense simulator runs with it, by name (``fgrpo_theory.weighting``)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_llm.config import TrainConfig  # noqa: E402
from fgrpo_llm.model import load_model_and_tokenizer  # noqa: E402
from fgrpo_llm.trainer import train  # noqa: E402
from fgrpo_theory.focal import focal_weight  # noqa: E402
from fgrpo_theory.sim.config import PRESETS  # noqa: E402
from fgrpo_theory.sim.sweep import run_sweep  # noqa: E402
from fgrpo_theory.weighting import Rule, register, unregister  # noqa: E402
from tests.llm._rl_helpers import ToyTask  # noqa: E402


class Bump(Rule):
    """w = 4 mu (1 - mu): most weight on the groups that are half right."""

    name, title = "bump", "Bump"

    def weight(self, mu, gamma):
        return 4.0 * mu * (1.0 - mu)


class Frozen(Rule):
    """w = 0: no group moves the policy."""

    name = "frozen"

    def weight(self, mu, gamma):
        return np.zeros_like(mu, dtype=np.float64)


class Doubled(Rule):
    """w = (1 - mu)^(2 gamma): the focal weight at twice the exponent."""

    name, takes_gamma = "doubled", True

    def weight(self, mu, gamma):
        return focal_weight(mu, 2.0 * gamma)


@pytest.fixture
def rules():
    for rule in (Bump(), Frozen(), Doubled()):
        register(rule)
    yield
    for name in ("bump", "frozen", "doubled"):
        unregister(name)


def _cfg(base, out, **kw):
    return TrainConfig(
        base=str(base), out=str(out), steps=2, prompts_per_step=4, group_size=4,
        max_new_tokens=4, lr=1e-2, warmup_steps=1, weight_decay=0.0, progress=False, **kw,
    )  # fmt: skip


def _records(out):
    return [json.loads(line) for line in (out / "groups.jsonl").read_text().splitlines()]


def test_the_trainer_trains_two_steps_with_a_weighting_of_this_file(
    rules, tiny_checkpoint, tmp_path
):
    train(_cfg(tiny_checkpoint, tmp_path / "bump", weighting="bump"), task=ToyTask())
    trained = [r for r in _records(tmp_path / "bump") if r["trained"]]
    assert trained and {r["step"] for r in trained} == {1, 2}
    for r in trained:  # each group's weight is the rule's w(X / N) (float32)
        mu = r["num_correct"] / r["N"]
        assert r["bump_weight"] == pytest.approx(4 * mu * (1 - mu), rel=1e-6, abs=1e-7)
    assert json.loads((tmp_path / "bump" / "run.json").read_text())["weighting"] == "bump"


@pytest.mark.slow  # two runs
def test_a_zero_weighting_of_this_file_leaves_the_policy_as_it_was(
    rules, tiny_checkpoint, tmp_path
):
    train(_cfg(tiny_checkpoint, tmp_path / "frozen", weighting="frozen"), task=ToyTask())
    assert all(r["frozen_weight"] == 0.0 for r in _records(tmp_path / "frozen") if r["trained"])
    base = load_model_and_tokenizer(tiny_checkpoint)[0].state_dict()
    after = load_model_and_tokenizer(tmp_path / "frozen" / "model")[0].state_dict()
    assert all(torch.equal(base[k], after[k]) for k in base)
    train(_cfg(tiny_checkpoint, tmp_path / "grpo", weighting="none"), task=ToyTask())
    moved = load_model_and_tokenizer(tmp_path / "grpo" / "model")[0].state_dict()
    assert not all(torch.equal(base[k], moved[k]) for k in base)  # (the check can fail)


def test_the_dense_simulator_runs_a_weighting_of_this_file(rules):
    cfg = replace(PRESETS["tiny"], group_sizes=(4, 16), steps=8, seeds=(0, 1))
    doubled = run_sweep(
        replace(cfg, weighting="doubled", gammas=(0.5,)), progress=False, engine="dense"
    )
    focal = run_sweep(
        replace(cfg, weighting="focal", gammas=(1.0,)), progress=False, engine="dense"
    )
    for key in ("q_pos", "m_ret", "entropy", "mu_hat"):  # (1 - mu)^(2 x 0.5) is focal at 1
        np.testing.assert_array_equal(doubled.records[key], focal.records[key])
    frozen = run_sweep(
        replace(cfg, weighting="frozen", gammas=(0.0,)), progress=False, engine="dense"
    )
    q = frozen.records["q_pos"]
    np.testing.assert_array_equal(q, np.broadcast_to(q[..., :1], q.shape))  # never moves
    assert frozen.weighting_label(0) == "frozen" and doubled.weighting_label(0) == "gamma=0.5"
    assert not np.array_equal(focal.records["q_pos"], q)
