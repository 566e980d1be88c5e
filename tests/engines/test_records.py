"""Engine-free parts of the integrations: the focal weight of flat (ragged) batches, the run records
that ``fgrpo-llm validate`` reads, and the clear ImportError of an absent engine."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_llm.advantages import focal_advantages, grpo_advantages
from fgrpo_llm.evaluation.runs import load_run
from fgrpo_llm.integrations.focal import FocalSettings, group_focal_weights
from fgrpo_llm.integrations.records import RunRecorder, records_from_verl_dump, text_prompt_id


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5),
    st.integers(2, 6),
    st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    st.integers(0, 2**31 - 1),
)
def test_flat_weights_times_grpo_equal_focal_advantages(B, N, gamma, seed):
    rng = np.random.default_rng(seed)
    R = torch.tensor(rng.integers(0, 2, size=(B, N)), dtype=torch.float32)  # (B, N)
    ids = np.repeat([f"p{b}" for b in range(B)], N)  # contiguous groups, string ids
    g, X, Nrow = group_focal_weights(R.reshape(-1), ids, FocalSettings(gamma=gamma))
    R64 = R.double()  # g is float64: the same equation in float64 gives the same bits
    flat = g.reshape(B, N) * grpo_advantages(R64)
    torch.testing.assert_close(flat, focal_advantages(R64, gamma=gamma), rtol=0, atol=0)
    assert torch.equal(X.reshape(B, N)[:, 0], R.sum(1).long()) and torch.all(Nrow == N)


def test_ragged_groups_interleaved_ids_and_thresholds():
    scores = torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
    ids = [7, 3, 7, 3, 3, 9]  # interleaved, ragged (2, 3, 1)
    g, X, N = group_focal_weights(scores, ids, FocalSettings(gamma=1.0, reward_wrong=-1.0))
    assert X.tolist() == [2, 0, 2, 0, 0, 1] and N.tolist() == [2, 3, 2, 3, 3, 1]
    assert g.tolist() == [0.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    g2, X2, _ = group_focal_weights(
        torch.tensor([0.3, 0.8, float("nan")]),
        ["a"] * 3,
        FocalSettings(gamma=2.0, correct_threshold=0.5),
    )
    assert X2.tolist() == [1, 1, 1] and g2.tolist() == pytest.approx([(2 / 3) ** 2] * 3, rel=1e-15)
    with pytest.raises(ValueError, match="reward_correct"):
        FocalSettings(reward_correct=0.0, reward_wrong=0.0)
    with pytest.raises(ValueError, match="gamma"):
        FocalSettings(gamma=float("nan"))
    with pytest.raises(ValueError, match="group ids"):
        group_focal_weights(torch.zeros(3), ["a", "b"], FocalSettings())


def test_recorder_writes_what_the_cross_check_reads(tmp_path, countdown_task):
    run_dir = tmp_path / "run"
    problems = {p.id: p for p in countdown_task.problems("train")[:2]}
    (a, pa), (b, pb) = problems.items()
    rec = RunRecorder(run_dir, engine="trl", algo="grpo", group_size=3, gamma=0.5)
    texts = ["nonsense", " nonsense ", "x", "y", "z"]
    recs = rec.log_batch(
        step=1,
        prompt_ids=[a, a, a, b, b],
        completions=texts,
        correct=[True, True, False, False, True],
        task=countdown_task,
        problems=problems,
    )
    rec.log_metrics(1, {"rare/delta_nll": 0.25})
    rec.close()
    run = load_run(run_dir)
    assert run.engine == "trl" and run.label == "F-GRPO N=3" and run.delta_nll_rare == 0.25
    assert [(g["prompt_id"], g["N"], g["num_correct"], g["trained"]) for g in run.groups] == [
        (a, 3, 2, True),
        (b, 2, 1, True),
    ]
    assert run.groups == [json.loads(json.dumps(r)) for r in recs]
    # a resumed run drops the lines of later steps
    RunRecorder(run_dir, engine="trl", algo="grpo", group_size=3, gamma=0.5, resume_step=0).close()
    assert load_run(run_dir).groups == []


def test_verl_dump_without_uids_groups_by_prompt_text(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    rows = [
        {"input": "Q1", "output": "a", "gts": "1", "score": 1.0, "step": 3},
        {"input": "Q1", "output": "b", "gts": "1", "score": 0.0, "step": 3},
        {"input": "Q2", "output": "c", "gts": "2", "score": 0.0, "step": 3, "prompt_id": "train-9"},
    ]
    (dump / "3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    records_from_verl_dump(dump, tmp_path / "run", algo="dapo", group_size=2, gamma=0.0)
    groups = load_run(tmp_path / "run").groups
    assert [(g["prompt_id"], g["N"], g["num_correct"], g["forms"]) for g in groups] == [
        (text_prompt_id("Q1"), 2, 1, ["a"]),
        ("train-9", 1, 0, []),
    ]
    with pytest.raises(ValueError, match="rollout_data_dir"):
        records_from_verl_dump(tmp_path, tmp_path / "r2", algo="grpo", group_size=2, gamma=0.0)
    # a prompt the index does not know would get a record no rare set names: refused, and
    # nothing is written
    index = {"Q0": "train-0"}  # Q1 unknown (Q2 carries its own id)
    with pytest.raises(ValueError, match=r"knows the prompt of 1 of 3 rows .*'Q1'"):
        records_from_verl_dump(
            dump,
            tmp_path / "r3",
            algo="grpo",
            group_size=2,
            gamma=0.0,
            prompt_id_of=lambda row: index.get(row["input"]),
        )
    assert not (tmp_path / "r3").exists()


def test_verl_dump_counts_a_correct_row_by_the_runs_settings(tmp_path):
    """``settings=`` (the run's focal settings) decides X as the run's estimator did: a score at
    the threshold is correct, one below it is not; without them the threshold is halfway
    between the 0/1 rewards. A MaxRL run's settings label its records MaxRL."""
    dump = tmp_path / "dump"
    dump.mkdir()
    scores = [0.8, 0.6, 1.0, 0.0]
    rows = [{"input": "Q", "output": f"o{i}", "score": s, "step": 1} for i, s in enumerate(scores)]
    (dump / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    at_08 = FocalSettings(gamma=1.0, correct_threshold=0.8)
    records_from_verl_dump(dump, run, algo="grpo", group_size=4, gamma=1.0, settings=at_08)
    (g,) = load_run(run).groups
    assert (g["N"], g["num_correct"], g["forms"]) == (4, 2, ["o0", "o2"])
    records_from_verl_dump(dump, run, algo="grpo", group_size=4, gamma=1.0)
    assert load_run(run).groups[0]["forms"] == ["o0", "o1", "o2"]  # threshold 0.5
    maxrl = FocalSettings(weighting="maxrl")
    records_from_verl_dump(dump, run, algo="grpo", group_size=4, gamma=0.0, settings=maxrl)
    assert load_run(run).label == "MaxRL N=4"


@pytest.mark.parametrize("engine", ["verl", "trl"])
def test_absent_engine_is_a_clear_import_error(engine):
    if importlib.util.find_spec(engine) is not None:
        pytest.skip(f"{engine} is installed here")
    with pytest.raises(ImportError, match=rf"not installed in this environment.*\.venv-{engine}"):
        importlib.import_module(f"fgrpo_llm.integrations.{engine}")


def test_maxrl_weighting_gives_maxrls_advantage_with_the_population_std():
    """FocalSettings(weighting='maxrl'): g = sqrt((1 - mu_hat) / mu_hat) per group, 0 when no
    answer is right; times GRPO's advantage with the population std and eps -> 0 it is MaxRL's
    (r - mu_hat) / mu_hat; the records label such a run MaxRL."""
    from fgrpo_llm.advantages import maxrl_advantages

    R = torch.tensor([[1.0, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]])  # (B, N)
    ids = np.repeat(["a", "b", "c"], 4)
    g, X, _ = group_focal_weights(R.reshape(-1), ids, FocalSettings(weighting="maxrl"))
    A = g.to(R.dtype).reshape(3, 4) * grpo_advantages(R, std="population", eps=0.0)
    torch.testing.assert_close(A, maxrl_advantages(R.bool()), rtol=1e-6, atol=1e-6)
    assert g.reshape(3, 4)[2].abs().sum() == 0
    with pytest.raises(ValueError, match="weighting"):
        FocalSettings(weighting="ppo")


def test_a_maxrl_run_is_labelled_maxrl(tmp_path):
    from fgrpo_llm.evaluation.runs import load_run
    from fgrpo_llm.integrations.records import RunRecorder

    rec = RunRecorder(tmp_path / "r", engine="trl", algo="grpo", group_size=4, gamma=0.0,
                      weighting="maxrl")  # fmt: skip
    rec.log_batch(step=1, prompt_ids=["p"] * 4, completions=["a"] * 4, correct=[1, 0, 0, 0])
    rec.close()
    assert load_run(tmp_path / "r").label == "MaxRL N=4"


def test_a_verl_dump_cut_mid_line_or_past_a_resume(tmp_path):
    """The last file's incomplete last line (a run still writing, or killed) is left out with a
    warning; one anywhere else is an error; ``max_step`` leaves out the files a resumed run has
    not rewritten yet."""
    dump = tmp_path / "dump"
    dump.mkdir()

    def line(step, score):
        return json.dumps({"input": "Q", "output": "a", "score": score, "step": step}) + "\n"

    (dump / "1.jsonl").write_text(line(1, 1.0) + line(1, 0.0))
    (dump / "2.jsonl").write_text(line(2, 1.0) + line(2, 1.0))
    (dump / "3.jsonl").write_text(line(3, 0.0) + line(3, 0.0)[:20])  # killed mid-line
    with pytest.warns(UserWarning, match=r"3.jsonl:2 is an incomplete last line"):
        records_from_verl_dump(dump, tmp_path / "run", algo="grpo", group_size=2, gamma=0.0)
    assert [(g["step"], g["N"]) for g in load_run(tmp_path / "run").groups] == [
        (1, 2),
        (2, 2),
        (3, 1),
    ]
    records_from_verl_dump(dump, tmp_path / "run", algo="grpo", group_size=2, gamma=0.0, max_step=2)
    assert [g["step"] for g in load_run(tmp_path / "run").groups] == [1, 2]
    (dump / "2.jsonl").write_text(line(2, 1.0)[:20] + "\n" + line(2, 1.0))  # not the last file
    with pytest.raises(ValueError, match=r"2.jsonl:1 is not JSON"):
        records_from_verl_dump(dump, tmp_path / "run", algo="grpo", group_size=2, gamma=0.0)
    with pytest.raises(ValueError, match="max_step must be an integer"):
        records_from_verl_dump(
            dump, tmp_path / "run", algo="grpo", group_size=2, gamma=0.0, max_step=-1
        )
    with pytest.raises(ValueError, match="up to step 0"):
        records_from_verl_dump(
            dump, tmp_path / "run", algo="grpo", group_size=2, gamma=0.0, max_step=0
        )
