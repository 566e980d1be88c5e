"""One command-line surface across ``fgrpo-theory`` and ``fgrpo-llm`` (``fgrpo_common.cli``): every
subcommand's ``--help`` works, every one takes ``--json``, the long ones take ``--no-progress``,
both commands answer ``--version``, old flag spellings are hidden aliases that print one
deprecation line, ``--json`` leaves nothing but one JSON document on stdout, and
``fgrpo-llm --help`` imports no torch. The LLM commands' ``--json`` runs on a tiny model are in
``tests/llm/test_cli_json.py``.

A new subcommand passes by: registering through its module's ``register(subparsers)`` without
importing torch at module level; adding ``--json`` (``fgrpo_common.cli.add_json_flag``) and
handing its result to ``json_result``; adding ``--no-progress``
(``fgrpo_common.cli.add_progress_flag``) when it is long; and taking its place in ``COMMANDS``
below.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

from fgrpo_common.cli import (
    OneLineArgumentParser,
    add_deprecated_alias,
    add_json_flag,
    add_progress_flag,
    bar_disabled,
    json_result,
    run_command,
)
from fgrpo_theory.cli import build_parser as theory_parser
from fgrpo_theory.cli import main as theory_main

#: Every subcommand of both commands -> whether it is long (takes --no-progress). A subcommand
#: missing here fails ``test_every_subcommand_is_listed``.
COMMANDS = {
    "fgrpo-theory": {
        "tail-miss": False,
        "peak": False,
        "pass-at-k": False,
        "simulate": True,
        "plan": False,
        "demo": True,
    },
    "fgrpo-llm": {
        "pretrain": True,
        "train": True,
        "eval": True,
        "compare": False,
        "rare-set": True,
        "exact": True,
        "mechanism": False,
        "forecast": True,
        "validate": False,
        "maze": True,
        "demo": True,
        "study": True,
    },
}

#: Spellings that name a concept another flag names (``--group-size``, ``--gamma``,
#: ``--samples``, ``--max-group-size``): hidden aliases only, never in ``--help``.
OLD_SPELLINGS = ("--n", "--n-max", "--group-sizes", "--gammas")


def _llm_parser():
    from fgrpo_llm.cli import build_parser

    return build_parser()


PARSERS = {"fgrpo-theory": theory_parser, "fgrpo-llm": _llm_parser}


def _subcommands(prog: str) -> dict[str, argparse.ArgumentParser]:
    parser = PARSERS[prog]()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _flags(parser: argparse.ArgumentParser, *, visible: bool = True) -> set[str]:
    return {
        flag
        for action in parser._actions
        if not (visible and action.help == argparse.SUPPRESS)
        for flag in action.option_strings
    }


ALL = [(prog, cmd) for prog, cmds in COMMANDS.items() for cmd in cmds]


@pytest.mark.parametrize("prog", sorted(COMMANDS))
def test_every_subcommand_is_listed(prog):
    assert set(_subcommands(prog)) == set(COMMANDS[prog])


@pytest.mark.parametrize(("prog", "command"), ALL)
def test_help_works(prog, command, capsys):
    main = theory_main if prog == "fgrpo-theory" else __import__("fgrpo_llm.cli").cli.main
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {prog} {command}") and "--json" in out


@pytest.mark.parametrize(("prog", "command"), ALL)
def test_every_subcommand_takes_json_and_the_long_ones_no_progress(prog, command):
    parser = _subcommands(prog)[command]
    flags = _flags(parser)
    assert "--json" in flags
    assert ("--no-progress" in flags) == COMMANDS[prog][command]
    assert not flags & set(OLD_SPELLINGS), f"{prog} {command} shows {flags & set(OLD_SPELLINGS)}"


@pytest.mark.parametrize("prog", sorted(COMMANDS))
def test_version(prog, capsys):
    main = theory_main if prog == "fgrpo-theory" else __import__("fgrpo_llm.cli").cli.main
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"{prog} {version('fgrpo')}"


def test_the_packages_say_the_installed_version():
    import fgrpo_common
    import fgrpo_llm
    import fgrpo_theory

    assert fgrpo_common.__version__ == fgrpo_theory.__version__ == fgrpo_llm.__version__
    assert fgrpo_theory.__version__ == version("fgrpo")


def test_llm_help_imports_no_torch():
    code = (
        "import sys\n"
        "from fgrpo_llm.cli import main\n"
        "for argv in (['--help'], ['train', '--help'], ['eval', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "usage: fgrpo-llm" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"


# ---------------------------------------------------------------------------------------------
# the theory commands' --json, on tiny inputs
# ---------------------------------------------------------------------------------------------

THEORY_JSON = {
    "tail-miss": ["--mu", "0.3", "--rho", "0.1", "--group-size", "1,8"],
    "peak": ["--mu", "0.3,0.8", "--rho", "0.05"],
    "pass-at-k": ["--samples", "16", "--c", "0,3", "--k", "1,4"],
    "plan": ["--mu", "0.05,0.3,0.9", "--rho", "0.1", "--group-size", "2,8", "--draws", "20"],
}


@pytest.mark.parametrize("command", sorted(THEORY_JSON))
def test_theory_json_is_one_document_on_stdout(command, capfd):
    assert theory_main([command, *THEORY_JSON[command], "--json"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)  # (raises on anything but one JSON document)
    assert "deprecated" not in err


def test_simulate_json(tmp_path, capfd):
    argv = ["simulate", "--preset", "tiny", "--steps", "3", "--engine", "sparse", "--json"]
    assert theory_main([*argv, "--csv", str(tmp_path / "x.csv"), "--no-progress"]) == 0
    out, err = capfd.readouterr()
    rows = json.loads(out)
    assert {r["N"] for r in rows} and all(0.0 <= r["q_pos"] <= 1.0 for r in rows)
    assert "wrote" in err  # the file lines go to stderr


def test_simulate_says_when_it_compiles_its_kernels(tmp_path, monkeypatch, capsys):
    from fgrpo_theory.cli import simulate
    from fgrpo_theory.sim import PRESETS
    from fgrpo_theory.sim import compiled as compiled_engine

    if compiled_engine.numba is None:
        pytest.skip("numba is not installed: nothing is compiled")
    cfg = PRESETS["tiny"]
    monkeypatch.setattr(simulate, "kernel_index", lambda compiled: str(tmp_path / "none.nbi"))
    assert simulate.announce_compilation(cfg, "auto")
    assert "compiling the simulator's kernels" in capsys.readouterr().err
    assert not simulate.announce_compilation(cfg, "sparse")  # the numpy engine: no compiling
    (tmp_path / "none.nbi").write_bytes(b"")  # cached
    assert not simulate.announce_compilation(cfg, "auto")
    assert capsys.readouterr().err == ""


def test_plan_prints_an_aligned_markdown_table(capsys):
    assert theory_main(["plan", *THEORY_JSON["plan"]]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + 2  # header, rule, N = 2 and N = 8
    assert len({len(r) for r in rows}) == 1  # every column padded to one width
    assert set(rows[1]) <= set("|-:")
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    assert [c[0] for c in cells[2:]] == ["2", "8"] and cells[0][0] == "N"


# ---------------------------------------------------------------------------------------------
# the conventions themselves, on a toy command
# ---------------------------------------------------------------------------------------------


def _toy(func) -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="toy")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineArgumentParser)
    p = sub.add_parser("run")
    size = p.add_argument("--group-size", type=int, default=8)
    add_deprecated_alias(p, "--n", size)
    add_json_flag(p)
    add_progress_flag(p)
    p.set_defaults(func=func)
    return parser


def test_an_old_spelling_sets_the_same_value_after_one_line_on_stderr(capsys):
    seen = []
    parser = _toy(lambda args: seen.append(args.group_size))
    assert run_command(parser, ["run", "--n", "4"]) == 0
    assert run_command(parser, ["run", "--group-size", "5"]) == 0
    assert run_command(parser, ["run"]) == 0
    assert seen == [4, 5, 8]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--n is deprecated" in err[0] and "--group-size" in err[0]
    with pytest.raises(SystemExit):
        run_command(parser, ["run", "--n", "x"])  # the alias converts with the flag's type


def test_json_sends_every_other_output_to_stderr(capfd):
    def command(args):
        print("a stage line")
        subprocess.run([sys.executable, "-c", "print('a worker line')"], check=True)
        return json_result(args, {"value": float("nan"), "n": 3})

    assert run_command(_toy(command), ["run", "--json"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out) == {"value": None, "n": 3}
    assert "a stage line" in err and "a worker line" in err
    assert run_command(_toy(command), ["run"]) == 0  # without --json: as before
    out, _ = capfd.readouterr()
    assert "a stage line" in out and json.loads(out.splitlines()[-1])["n"] == 3


def test_no_progress_switches_every_bar_off_for_the_command_only(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    seen = []

    def command(args):
        seen.append((os.environ.get("TQDM_DISABLE"), bar_disabled(True)))

    assert run_command(_toy(command), ["run", "--no-progress"]) == 0
    assert run_command(_toy(command), ["run"]) == 0
    assert seen == [("1", True), (None, None)]  # None: tqdm's own "off when not a terminal"
    assert "TQDM_DISABLE" not in os.environ
    assert bar_disabled(False) is True


def test_a_bar_is_off_when_stderr_is_not_a_terminal():
    code = (
        "import sys\n"
        "from tqdm import tqdm\n"
        "from fgrpo_common.cli import bar_disabled\n"
        "print(tqdm(total=3, file=sys.stderr, disable=bar_disabled(True)).disable)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "True" and done.stderr == ""


@pytest.mark.slow
def test_theory_demo_json(tmp_path, capfd):
    assert theory_main(["demo", "--out", str(tmp_path), "--fast", "--no-progress", "--json"]) == 0
    out, err = capfd.readouterr()
    summary = json.loads(out)
    assert summary["theory"]["figures"] and summary["regimes"]["csv"]
    assert "theory: Fig. 1(a)" in err  # the stage lines go to stderr
