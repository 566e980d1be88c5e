"""The rare-correct set and Delta NLL_rare (fgrpo_llm.evaluation.rare): every kept trajectory is
correct and among the highest-NLL correct rollouts, its stored NLL is the model's, (mu, tau) are
consistent frequencies, Delta NLL_rare is 0 at the base and moves with the weights, and the artifact
round-trips through its file and the CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_llm.cli import main  # noqa: E402
from fgrpo_llm.evaluation.rare import (  # noqa: E402
    _assign_rare_events,
    _top_fraction_indices,
    build_rare_set,
    delta_nll_rare,
    length_normalised_nll,
    load_rare_set,
    make_rare_evaluator,
    save_rare_set,
)
from fgrpo_llm.rollout import SamplingParams  # noqa: E402


class FirstCharTask:
    """Correct when the completion starts with a digit; the form is its first two characters."""

    name = "firstchar"
    splits = ("train",)

    def __init__(self, problems):
        self._problems = problems

    def problems(self, split):
        return list(self._problems)

    def is_correct(self, problem, completion):
        return completion[:1].isdigit()

    def reward(self, problem, completion):
        return 1.0 if self.is_correct(problem, completion) else 0.0

    def solution_form(self, problem, completion):
        return completion[:2] if self.is_correct(problem, completion) else None


def _first_char_rare_set(
    model,
    tokenizer,
    countdown_task,
    prompts: int,
    *,
    batch_size=None,
    autocast_dtype=None,
    **kwargs,
):
    """The FirstCharTask of the first ``prompts`` Countdown training problems and its rare set
    (4 new tokens, seed 0; ``kwargs``: the rest of ``build_rare_set``'s settings)."""
    task = FirstCharTask(countdown_task.problems("train")[:prompts])
    rare = build_rare_set(
        model,
        tokenizer,
        task,
        task.problems("train"),
        sampling=SamplingParams(
            max_new_tokens=4, batch_size=batch_size, autocast_dtype=autocast_dtype
        ),
        generator=torch.Generator().manual_seed(0),
        **kwargs,
    )
    return task, rare


@pytest.fixture
def rare_setup(tiny_model, char_tokenizer, countdown_task):
    task, rare = _first_char_rare_set(
        tiny_model,
        char_tokenizer,
        countdown_task,
        4,
        num_rollouts=40,
        top_fraction=0.1,
        batch_size=64,
    )
    return tiny_model, char_tokenizer, task, rare


def test_top_fraction_keeps_the_largest_values():
    nll = np.array([0.5, 3.0, 1.0, 2.0, 0.1])
    assert sorted(_top_fraction_indices(nll, 0.4).tolist()) == [1, 3]
    assert _top_fraction_indices(nll, 0.01).tolist() == [1]  # at least one
    assert len(_top_fraction_indices(np.zeros(0), 0.5)) == 0


def test_rare_set_holds_the_highest_nll_correct_rollouts(rare_setup):
    model, tok, task, rare = rare_setup
    pool = rare.meta["num_correct_pool"]
    assert pool > 0
    assert len(rare) == math.ceil(0.1 * pool)
    problems = {p.id: p for p in task.problems("train")}
    for pid, text, form in zip(rare.prompt_ids, rare.texts, rare.forms, strict=True):
        assert task.reward(problems[pid], text) == 1.0 and form == text[:2]
    assert rare.base_nll.min() == pytest.approx(rare.meta["nll_threshold"])
    assert rare.base_nll.min() >= rare.meta["pool_mean_nll"]
    assert sum(p["num_correct"] for p in rare.prompts.values()) == pool
    for p in rare.prompts.values():
        assert p["mu"] == pytest.approx(p["num_correct"] / 40)
        assert 0 <= p["tau"] <= p["mu"]
        assert p["tau"] == pytest.approx(sum(p["form_counts"][f] for f in p["rare_forms"]) / 40)


def test_stored_nll_is_the_length_normalised_nll_of_each_sequence(rare_setup):
    model, tok, task, rare = rare_setup
    for ids, plen, nll in zip(rare.token_ids, rare.prompt_lengths, rare.base_nll, strict=True):
        x = torch.tensor([ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), dim=-1)  # (L-1, V)
        # the completion's tokens
        token_logp = logp.gather(1, x[0, 1:, None]).squeeze(1)[plen - 1 :]
        assert nll == pytest.approx(float(-token_logp.mean()), abs=1e-5)
        assert ids[-1] == tok.eos_token_id or len(ids) - plen == 4  # EOS kept, or the token limit


def test_a_set_sampled_under_autocast_keeps_base_nll_at_full_precision(
    tiny_model, char_tokenizer, countdown_task
):
    # sampling may run under bf16 autocast (a GPU's default); the stored base NLL must be the
    # one Delta NLL_rare scores the policy with, so that the base itself gives exactly 0
    _, rare = _first_char_rare_set(
        tiny_model,
        char_tokenizer,
        countdown_task,
        2,
        num_rollouts=20,
        top_fraction=0.5,
        autocast_dtype=torch.bfloat16,
    )
    assert len(rare) > 0
    assert delta_nll_rare(tiny_model, rare) == 0.0


def test_delta_nll_is_zero_at_the_base_and_moves_with_the_weights(rare_setup):
    model, tok, task, rare = rare_setup
    assert delta_nll_rare(model, rare) == pytest.approx(0.0, abs=1e-6)
    with torch.no_grad():
        model.lm_head.weight.add_(
            0.5
            * torch.randn(model.lm_head.weight.shape, generator=torch.Generator().manual_seed(1))
        )
    moved = delta_nll_rare(model, rare)
    expected = (
        length_normalised_nll(model, rare.token_ids, rare.prompt_lengths).mean()
        - rare.base_nll.mean()
    )
    assert moved != pytest.approx(0.0, abs=1e-3) and moved == pytest.approx(expected)
    metrics = make_rare_evaluator(rare)(model, 5)
    assert metrics["rare/delta_nll"] == pytest.approx(moved) and metrics["rare/size"] == len(rare)


def test_designated_rare_mode_for_prompts_without_a_rare_trajectory():
    prompts = {
        "a": {"num_rollouts": 10, "form_counts": {"x": 6, "y": 1, "z": 1}},
        "b": {"num_rollouts": 10, "form_counts": {"x": 3}},
        "c": {"num_rollouts": 10, "form_counts": {"x": 2, "w": 1}},
    }
    _assign_rare_events(prompts, [("c", [], 0, "x", "x")])
    assert prompts["a"]["rare_forms"] == ["y"] and prompts["a"]["tau"] == pytest.approx(0.1)
    assert prompts["a"]["rare_source"] == "designated"
    assert prompts["b"]["rare_forms"] == [] and prompts["b"]["tau"] == 0
    assert prompts["c"]["rare_forms"] == ["x"] and prompts["c"]["rare_source"] == "rare_set"


def test_save_load_round_trip(rare_setup, tmp_path):
    model, tok, task, rare = rare_setup
    back = load_rare_set(save_rare_set(rare, tmp_path / "r.json"))
    assert (
        back.token_ids == rare.token_ids
        and back.prompts == rare.prompts
        and back.texts == rare.texts
    )
    np.testing.assert_allclose(back.base_nll, rare.base_nll)
    assert delta_nll_rare(model, back) == pytest.approx(0.0, abs=1e-6)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a rare-correct set"):
        load_rare_set(tmp_path / "bad.json")


def test_rare_set_cli(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "rare.json"
    assert (
        main(
            [
                "rare-set",
                "--base",
                str(tiny_checkpoint),
                "--out",
                str(out),
                "--prompts",
                "2",
                "--rollouts",
                "8",
                "--max-new-tokens",
                "4",
            ]
        )
        == 0
    )
    rare = load_rare_set(out)
    assert len(rare.prompts) == 2 and rare.meta["num_rollouts"] == 8
    assert main(["rare-set", "--base", str(tiny_checkpoint), "--out", str(out), "--top", "2"]) == 2
    assert "top_fraction" in capsys.readouterr().err
