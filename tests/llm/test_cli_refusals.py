"""Every command checks all of its arguments and inputs before it creates or writes anything.

A generated table: for every subcommand of ``fgrpo-llm`` and ``fgrpo-theory``, a baseline
argument list that passes every check, with one flag replaced by a bad value: each integer flag
at -1 and at 2^64 (beyond every bound), each output path empty (an unset shell variable), each
list with an entry twice. The property: the command is refused (exit status 2, one stderr line,
no traceback) and the folder it runs in, which holds its --out and its inputs, is exactly as
before (every path, every file's bytes). The work past the checks (training, sampling, a sweep)
is replaced by a stand-in that fails the case if it is reached: a bad value must be refused
before it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from fgrpo_llm.cli import build_parser as llm_parser
from fgrpo_llm.cli import main as llm_main
from fgrpo_llm.evaluation.passk import pass_at_k_table, write_eval_outputs
from fgrpo_theory.cli import build_parser as theory_parser
from fgrpo_theory.cli import main as theory_main
from tests.theory.test_cli_simulate import TINY

BIG = str(2**64)  # 18446744073709551616: past int64, past every bound
PATH_FLAGS = {"out", "csv", "plot", "spread_file"}


class Reached(BaseException):
    """The command went past its checks to the real work with a bad argument."""


def _reached(*args, **kwargs):
    raise Reached()


#: What each command does once its arguments are checked: replaced by ``_reached``.
HEAVY = [
    "fgrpo_llm.trainer.train",
    "fgrpo_llm.model.load_model_and_tokenizer",
    "fgrpo_llm.experiments.countdown.base.pretrain",
    "fgrpo_llm.experiments.countdown.pipeline.run_demo",
    "fgrpo_llm.cli.study.run_study",
    "fgrpo_llm.experiments.maze.pipeline.run_experiment",
    "fgrpo_llm.cli.maze.run_maze_bases",
    "fgrpo_llm.cli.validate.cross_check",
    "fgrpo_theory.cli.simulate.run_cached",
    "fgrpo_theory.cli.simulate.run_sweep",
    "fgrpo_theory.demo.run_theory_demo",
    "fgrpo_theory.demo.regime_sweep_demo",
]

#: Per command: the CLI and a baseline that passes every check ({ckpt}: a tiny checkpoint).
BASELINES = {
    ("llm", "pretrain"): ["--out", "out", "--steps", "1", "--device", "cpu"],
    ("llm", "train"): ["--base", "{ckpt}", "--out", "out", "--steps", "1", "--device", "cpu"],
    ("llm", "eval"): ["--model", "{ckpt}", "--out", "out", "--samples", "2", "--device", "cpu"],
    ("llm", "compare"): ["ev_a", "ev_b", "--m", "4", "--k", "1", "--out", "out.json"],
    ("llm", "rare-set"): ["--base", "{ckpt}", "--out", "out.json", "--device", "cpu"],
    ("llm", "validate"): ["--rare-set", "rare.json", "--run", "no_run", "--out", "out"],
    ("llm", "maze"): ["--out", "out", "--no-progress"],
    ("llm", "demo"): ["--out", "out", "--fast", "--device", "cpu"],
    ("llm", "study"): ["--out", "out", "--fast", "--device", "cpu"],
    ("theory", "tail-miss"): ["--mu", "0.5", "--group-size", "4", "--plot", "out.png"],
    ("theory", "peak"): ["--mu", "0.5"],
    ("theory", "pass-at-k"): ["--k", "1,2", "--p", "0.5"],
    ("theory", "simulate"): [*TINY, "--workers", "1", "--out", "out"],
    ("theory", "plan"): ["--mu", "0.1,0.5", "--plot", "out.png"],
    ("theory", "demo"): ["--out", "out", "--fast"],
}

#: List flags (comma-separated): an entry given twice, an entry past int64.
LISTS = {
    ("llm", "maze"): {
        "--group-size": ["4,4"], "--gamma": ["1,1"], "--seeds": ["0,0", BIG], "--bases": ["0,0"],
        "--workers": ["100000"], "--hidden-size": ["7"],
    },
    ("llm", "study"): {
        "--sweep-sizes": ["4,4", str(2**63)], "--bases": ["0,0"], "--seeds": ["1,1"],
        "--workers": ["100000"],
    },
    ("llm", "demo"): {"--workers": ["100000"]},
    ("theory", "simulate"): {"--group-size": ["2,2"], "--gamma": ["1,1"], "--seeds": ["0,0"]},
    ("theory", "plan"): {"--group-size": ["4,4"]},
}  # fmt: skip

#: Integer flags of a command checked by default (the rest run with ``-m slow``).
FAST_INTS = 1


def _subparsers(parser):
    return next(a for a in parser._actions if isinstance(a.choices, dict)).choices


def _cases():
    cases = []
    parsers = {"llm": _subparsers(llm_parser()), "theory": _subparsers(theory_parser())}
    for cli, command in BASELINES:
        ints = 0
        for action in parsers[cli][command]._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue  # (argparse's --help, and the hidden deprecated spellings)
            flag = next(o for o in action.option_strings if o.startswith("--"))
            marks = ()
            if action.type is int:
                values = ["-1", BIG]
                ints += 1
                marks = (pytest.mark.slow,) if ints > FAST_INTS else ()
            elif action.dest in PATH_FLAGS:
                values = [""]
            else:
                values = []
            values += LISTS.get((cli, command), {}).get(flag, [])
            for v in values:
                name = f"{cli}-{command}{flag}={v}"
                cases.append(pytest.param(cli, command, flag, v, id=name, marks=marks))
    return cases


def _with(base: list[str], flag: str, value: str) -> list[str]:
    """``base`` with ``flag`` set to ``value`` (replaced where the baseline gives it)."""
    out = list(base)
    if flag in out:
        out[out.index(flag) + 1] = value
        return out
    return out + [flag, value]


def _snapshot(root: Path) -> dict:
    tree = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        tree[str(rel)] = "dir"
        for name in filenames:
            p = Path(dirpath) / name
            tree[str(rel / name)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return tree


def _fake_eval(path: Path, seed: int) -> None:
    m = (np.random.default_rng(seed).random((3, 16)) < 0.5).astype(np.int8)
    res = {"n": 16, "ks": [1], "splits": {"test": {
        "role": "in_domain", "num_problems": 3, "problem_ids": ["a", "b", "c"],
        "counts": m.sum(1).tolist(), **pass_at_k_table(m.sum(1), 16, [1])}}}  # fmt: skip
    write_eval_outputs(res, {"test": m}, path)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    root = tmp_path / "work"
    root.mkdir()
    _fake_eval(root / "ev_a", 0)
    _fake_eval(root / "ev_b", 1)
    (root / "rare.json").write_text("{}")
    monkeypatch.chdir(root)
    for target in HEAVY:
        monkeypatch.setattr(target, _reached)
    return root


@pytest.mark.parametrize("cli, command, flag, value", _cases())
def test_a_refused_command_leaves_the_folder_as_it_found_it(
    workdir, tiny_checkpoint, capsys, cli, command, flag, value
):
    base = [a.format(ckpt=tiny_checkpoint) for a in BASELINES[(cli, command)]]
    argv = [command, *_with(base, flag, value)]
    before, ckpt_before = _snapshot(workdir), _snapshot(tiny_checkpoint)
    main = llm_main if cli == "llm" else theory_main
    try:
        rc = main(argv)
    except SystemExit as exit_:  # argparse's own refusals
        rc = exit_.code
    except Reached:
        rc = "reached the work past the checks"
    err = capsys.readouterr().err
    assert rc == 2, (argv, rc, err)
    assert "Traceback" not in err and err.strip(), err
    assert _snapshot(workdir) == before, argv
    assert _snapshot(tiny_checkpoint) == ckpt_before, argv
