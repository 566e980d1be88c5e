"""Hostile files and arguments, each one clear error before anything is written: a config.json of
another architecture beside the weights; a huge dataset row; damaged group records (ours, TRL's,
verl's dump); damaged rare-set files; finite weights that overflow (caught before anything of the
step is saved, and on resume); bad arguments of demo / study / maze / eval; a damaged
pretrain_config.json."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from fgrpo_llm.cli import main
from fgrpo_llm.evaluation.rare import RareSet, load_rare_set, save_rare_set
from fgrpo_llm.evaluation.runs import load_run
from fgrpo_llm.model import load_model_and_tokenizer
from fgrpo_llm.tracking import write_run_info


def _one_line(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    for needle in needles:
        assert needle in err[0], (needle, err[0])
    return err[0]


def test_a_config_of_another_architecture_is_refused(tiny_checkpoint, tmp_path, capsys):
    from transformers import GPT2Config

    bad = tmp_path / "bad"
    shutil.copytree(tiny_checkpoint, bad)
    vocab = json.loads((tiny_checkpoint / "config.json").read_text())["vocab_size"]
    GPT2Config(vocab_size=vocab, n_embd=32, n_layer=1, n_head=2, bos_token_id=0,
               eos_token_id=0).save_pretrained(bad)  # fmt: skip
    with pytest.raises(ValueError, match="do not fit the model_type='gpt2'"):
        load_model_and_tokenizer(bad)
    assert main(["eval", "--model", str(bad), "--out", str(tmp_path / "ev"), "--samples", "2"]) == 2
    _one_line(capsys, "model_type='gpt2'")
    assert not (tmp_path / "ev").exists()
    argv = ["train", "--base", str(bad), "--out", str(tmp_path / "run"), "--steps", "1"]
    assert main(argv) == 2
    _one_line(capsys, "model_type='gpt2'")


def test_a_huge_dataset_row_is_dropped_without_tokenizing(tmp_path):
    from fgrpo_llm.tasks import boxed_math

    path = tmp_path / "train.jsonl"
    rows = [{"problem": "x" * 2_000_000, "answer": "1"}, {"problem": "1+1?", "answer": "2"}]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    seen = []

    class Tok:  # a tokenizer that records the length of each text it is given
        chat_template = None

        def __call__(self, text, add_special_tokens=False):
            seen.append(len(text))
            return {"input_ids": [0] * (len(text) // 4)}  # as a BatchEncoding reads

    problems, stats = boxed_math.load_boxed_problems(path, "train", tokenizer=Tok())
    assert [p.meta["problem"] for p in problems] == ["1+1?"] and stats.too_long == 1
    assert max(seen) < 10_000


@pytest.mark.parametrize(
    "row, needle",
    [
        ({"num_correct": 5}, "num_correct must be an integer in [0, N=4]"),
        ({"num_correct": -1}, "num_correct"),
        ({"N": 4.5}, "N must be an integer"),
        ({"N": 1e30}, "N must be an integer"),
        ({"num_correct": True}, "num_correct"),
        ({"step": "one"}, "step must be"),
        ({"forms": ["a", "b"]}, "forms must be a list of num_correct=1"),
        ({"trained": "yes"}, "trained must be"),
    ],
)
def test_damaged_group_records_name_file_and_line(tmp_path, capsys, row, needle):
    run = tmp_path / "run"
    run.mkdir()
    write_run_info(run, engine="trl", algo="grpo", group_size=4, gamma=1.0)
    good = {"step": 1, "prompt_id": "p", "N": 4, "num_correct": 1, "forms": ["a"], "trained": True}
    lines = [json.dumps(good), json.dumps({**good, **row})]
    (run / "groups.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="groups.jsonl:2") as err:
        load_run(run)
    assert needle in str(err.value)
    rare = save_rare_set(RareSet([], [], [], [], [], np.zeros(0), {}), tmp_path / "rare.json")
    argv = ["validate", "--rare-set", str(rare), "--run", str(run), "--out", str(tmp_path / "v")]
    assert main(argv) == 2
    _one_line(capsys, "groups.jsonl:2", needle)


def test_a_bad_verl_dump_row_writes_nothing(tmp_path):
    from fgrpo_llm.integrations.records import records_from_verl_dump

    dump = tmp_path / "dump"
    dump.mkdir()
    rows = [
        {"input": "Q", "output": "a", "score": 1.0},
        {"input": "Q", "output": "b", "score": None},
    ]
    (dump / "3.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(ValueError, match=r"3.jsonl:2: score must be a finite number"):
        records_from_verl_dump(dump, tmp_path / "run", algo="grpo", group_size=2, gamma=1.0)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda d: d.update(prompts=5), "'prompts' must be an object"),
        (lambda d: d["trajectories"][0].update(token_ids=[1, -2]), "token_ids"),
        (lambda d: d["trajectories"][0].update(prompt_length=99), "prompt_length"),
        (lambda d: d["trajectories"][0].update(base_nll="x"), "base_nll"),
        (lambda d: d["prompts"]["p"].update(mu=2.0), "mu must lie in [0, 1]"),
        (lambda d: d["prompts"]["p"].pop("rare_forms"), "rare_forms must be a list"),
        (lambda d: d["prompts"]["p"].pop("mu"), "has no mu"),
    ],
)
def test_damaged_rare_sets_are_refused_on_read(tmp_path, capsys, edit, needle):
    rare = RareSet(["p"], [[1, 2, 3]], [1], ["t"], [None], np.zeros(1),
                   {"p": {"mu": 0.5, "tau": 0.1, "rare_forms": ["r"]}})  # fmt: skip
    path = save_rare_set(rare, tmp_path / "rare.json")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="not a rare-correct set file") as err:
        load_rare_set(path)
    assert needle in str(err.value)


def test_a_rare_set_of_another_vocabulary_fails_before_the_run_starts(
    tiny_checkpoint, tmp_path, capsys
):
    vocab = json.loads((tiny_checkpoint / "config.json").read_text())["vocab_size"]
    rare = RareSet(["p"], [[1, vocab + 5]], [1], ["t"], [None], np.zeros(1), {})
    path = save_rare_set(rare, tmp_path / "rare.json")
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        load_rare_set(path, vocab_size=vocab)
    run = tmp_path / "run"
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(run), "--steps", "1",
            "--rare-set", str(path), "--eval-every", "1", "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    _one_line(capsys, "outside the model's vocabulary")
    assert not run.exists()


def test_finite_weights_that_overflow_stop_the_run_before_anything_is_saved(
    tiny_checkpoint, tmp_path, capsys
):
    """--lr 1e30: the first update leaves finite weights that overflow in the forward pass;
    the run stops at that step (one line, exit 2), its last checkpoint is one from before, and
    --resume stops the same way instead of sampling from it."""
    run = tmp_path / "run"
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(run), "--lr", "1e30",
            "--steps", "6", "--prompts-per-step", "4", "--group-size", "4",
            "--checkpoint-every", "1", "--warmup-steps", "1", "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    line = _one_line(capsys)
    assert ("NaN or inf" in line or "beyond 1e+15" in line) and "nothing of this step" in line
    step = int(line.split("step ")[1].split(":")[0])
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(steps, default=0) == step - 1
    for ckpt in (run / "checkpoints").glob("step_*"):
        model, _ = load_model_and_tokenizer(ckpt)
        assert int(ckpt.name.split("_")[1]) < step
    assert main(["train", "--out", str(run), "--resume", "--no-progress"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]  # after "no checkpoint yet", if so
    assert "NaN or inf" in line or "beyond 1e+15" in line


def test_a_checkpoint_with_overflowing_weights_is_refused_on_resume(
    tiny_checkpoint, tmp_path, capsys
):
    """A checkpoint whose weights are finite but huge (written by a run without this check)
    cannot be resumed: one line naming it and the parameter, before any step."""
    from safetensors.torch import load_file, save_file

    from fgrpo_llm.checkpoint import MANIFEST, _write_manifest

    run = tmp_path / "run"
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(run), "--steps", "2",
            "--prompts-per-step", "2", "--group-size", "2", "--checkpoint-every", "1",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    ckpt = run / "checkpoints" / "step_000002"
    weights = load_file(str(ckpt / "model.safetensors"))
    name = next(iter(weights))
    weights[name] = weights[name] * 1e20
    save_file(weights, str(ckpt / "model.safetensors"))
    (ckpt / MANIFEST).unlink()
    _write_manifest(ckpt)  # an intact checkpoint, as far as its files go
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--steps", "3", "--no-progress"]) == 2
    _one_line(capsys, "the checkpoint of step 2", "beyond 1e+15")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["maze", "--device", "bogus"], "device"),
        (["demo", "--fast", "--device", "bogus"], "device"),
        (["study", "--fast", "--device", "bogus"], "device"),
        (["study", "--fast", "--seeds", "18446744073709551616"], "--seeds"),
    ],
)
def test_bad_arguments_fail_before_any_file(tmp_path, capsys, argv, needle):
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out)]) == 2
    _one_line(capsys, needle)
    assert not out.exists()


def test_eval_leaves_no_empty_out_on_an_early_error(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "ev"
    argv = ["eval", "--model", str(tiny_checkpoint), "--out", str(out), "--splits", "nope"]
    assert main(argv) == 2
    _one_line(capsys, "unknown split")
    assert not out.exists()


def test_a_damaged_pretrain_config_is_an_error_not_the_defaults(tiny_checkpoint, tmp_path):
    from fgrpo_llm.tasks.for_model import model_task_kwargs

    base = tmp_path / "base"
    shutil.copytree(tiny_checkpoint, base)
    (base / "pretrain_config.json").write_text('{"task_seed": 3, "num_te')
    with pytest.raises(ValueError, match="pretrain_config.json is damaged"):
        model_task_kwargs(base, "countdown")
    (base / "pretrain_config.json").write_text('{"task_seed": -1}')
    with pytest.raises(ValueError, match="seed must be an integer"):
        model_task_kwargs(base, "countdown")


def test_a_model_saved_over_a_directory_keeps_what_else_is_there(tiny_checkpoint, tmp_path):
    """A user's notes and an evaluation beside the weights survive a save (a resumed run's
    final model, a pretrain into a used folder); the model's own files are replaced; the
    working directory itself is refused (it cannot be renamed)."""
    import os

    from fgrpo_llm.model import save_model_and_tokenizer

    model, tok = load_model_and_tokenizer(tiny_checkpoint)
    target = tmp_path / "model"
    shutil.copytree(tiny_checkpoint, target)
    (target / "notes.txt").write_text("mine")
    (target / "eval").mkdir()
    (target / "eval" / "eval.json").write_text("{}")
    (target / "pytorch_model.bin").write_bytes(b"stale weights")  # the model's: not kept
    save_model_and_tokenizer(model, tok, target)
    assert (target / "notes.txt").read_text() == "mine"
    assert (target / "eval" / "eval.json").is_file() and (target / "model.safetensors").is_file()
    assert not (target / "pytorch_model.bin").exists()
    here = os.getcwd()
    os.chdir(target)
    try:
        with pytest.raises(ValueError, match="working directory"):
            save_model_and_tokenizer(model, tok, ".")
    finally:
        os.chdir(here)
