"""Tests of the Maze single-solution task (paper Section 5.2, Appendix K) and a tiny-budget run of
its pipeline (one SFT model, every (method, N) run per RL seed, stage resume, CLI errors)."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_llm.tasks.maze import (
    END,
    MOVES,
    MazeTask,
    decode_prompt,
    encode_prompt,
    generate_maze,
    solve,
    walk,
)


def _cell_graph(open_grid: np.ndarray) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Adjacency of the cells read straight off the grid (independent of Maze.neighbours)."""
    c = (open_grid.shape[0] - 1) // 2
    graph: dict[tuple[int, int], list[tuple[int, int]]] = {
        (r, q): [] for r in range(c) for q in range(c)
    }
    for r in range(c):
        for q in range(c):
            if q + 1 < c and open_grid[2 * r + 1, 2 * q + 2]:
                graph[(r, q)].append((r, q + 1))
                graph[(r, q + 1)].append((r, q))
            if r + 1 < c and open_grid[2 * r + 2, 2 * q + 1]:
                graph[(r, q)].append((r + 1, q))
                graph[(r + 1, q)].append((r, q))
    return graph


def _count_simple_paths(graph, start, goal) -> int:
    """Exhaustive DFS over simple paths (fine for the small grids used here)."""
    count, stack = 0, [(start, frozenset([start]))]
    while stack:
        cell, seen = stack.pop()
        if cell == goal:
            count += 1
            continue
        stack.extend((nxt, seen | {nxt}) for nxt in graph[cell] if nxt not in seen)
    return count


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), grid_size=st.sampled_from([5, 7, 9, 11]))
def test_generated_maze_is_a_spanning_tree_with_one_path(seed, grid_size):
    maze = generate_maze(grid_size, np.random.default_rng(seed))
    graph = _cell_graph(maze.open_grid)
    c = maze.cells
    edges = sum(len(v) for v in graph.values()) // 2
    assert edges == c * c - 1
    reached, queue = {maze.start}, deque([maze.start])
    while queue:
        for nxt in graph[queue.popleft()]:
            if nxt not in reached:
                reached.add(nxt)
                queue.append(nxt)
    assert len(reached) == c * c  # connected + (cells - 1) edges = a tree
    assert maze.start != maze.goal
    assert _count_simple_paths(graph, maze.start, maze.goal) == 1
    # no open square outside cells and passages between cells
    assert not maze.open_grid[::2, ::2].any()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), grid_size=st.sampled_from([5, 9, 17]))
def test_solution_walks_from_start_to_goal(seed, grid_size):
    maze = generate_maze(grid_size, np.random.default_rng(seed))
    moves = solve(maze)
    cell = maze.start
    for move in moves:
        dr, dq = MOVES[move]
        assert maze.open_grid[2 * cell[0] + 1 + dr, 2 * cell[1] + 1 + dq]  # through a passage
        cell = (cell[0] + dr, cell[1] + dq)
    assert cell == maze.goal
    assert walk(maze, " ".join(moves + [END])) == "solved"


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), grid_size=st.sampled_from([5, 9, 17]))
def test_encoding_round_trip(seed, grid_size):
    maze = generate_maze(grid_size, np.random.default_rng(seed))
    back = decode_prompt(encode_prompt(maze))
    assert np.array_equal(back.open_grid, maze.open_grid)
    assert (back.start, back.goal) == (maze.start, maze.goal)
    assert len(encode_prompt(maze).split()) == (grid_size - 2) ** 2 + 1  # no outer ring, then '>'


def _near_misses(moves: list[str]) -> dict[str, str]:
    path = " ".join(moves)
    wrong = [m for m in MOVES if m != moves[0]][0]
    return {
        "one wrong move": " ".join([wrong] + moves[1:] + [END]),
        "extra move": " ".join(moves + [moves[-1], END]),
        "missing termination": path,
        "missing last move": " ".join(moves[:-1] + [END]),
        "trailing tokens": f"{path} {END} U",
        "double termination": f"{path} {END} {END}",
        "garbage": "hello maze",
        "empty": "",
        "answer mark": f"> {path} {END}",
    }


def test_verifier_accepts_the_solution_and_rejects_near_misses():
    task = MazeTask(grid_size=9, num_train=20, num_test=20, seed=3)
    for problem in task.problems("test"):
        moves = problem.answer.split()
        assert task.reward(problem, f"{problem.answer} {END}") == 1.0
        assert (
            task.reward(problem, f"  {problem.answer}   {END}\n") == 1.0
        )  # whitespace is not a token
        assert task.solution_form(problem, f"{problem.answer} {END}") == problem.answer
        maze = decode_prompt(problem.prompt)
        for name, completion in _near_misses(moves).items():
            assert task.reward(problem, completion) == 0.0, name
            assert task.solution_form(problem, completion) is None, name
            assert walk(maze, completion) != "solved", name


def test_walk_names_the_failure():
    task = MazeTask(grid_size=9, num_train=5, num_test=5, seed=0)
    problem = task.problems("test")[0]
    maze, moves = decode_prompt(problem.prompt), problem.answer.split()
    assert walk(maze, " ".join(moves)) == "no_end"
    assert walk(maze, f"{problem.answer} {END} U") == "trailing"
    assert walk(maze, "x") == "invalid_token"
    if len(moves) > 1:
        assert walk(maze, " ".join(moves[:-1] + [END])) == "early_end"
    # stepping back onto the path just walked
    back = {"U": "D", "D": "U", "L": "R", "R": "L"}[moves[0]]
    assert walk(maze, f"{moves[0]} {back} {END}") == "revisit"


def test_splits_are_disjoint_distinct_and_deterministic():
    task = MazeTask(grid_size=7, num_train=300, num_test=100, seed=1)
    train, test = task.problems("train"), task.problems("test")
    assert len(train) == 300 and len(test) == 100
    train_prompts, test_prompts = {p.prompt for p in train}, {p.prompt for p in test}
    assert len(train_prompts) == 300 and len(test_prompts) == 100
    assert not train_prompts & test_prompts
    assert {p.split for p in train} == {"train"} and {p.split for p in test} == {"test"}
    again = MazeTask(grid_size=7, num_train=300, num_test=100, seed=1)
    assert [p.prompt for p in again.problems("test")] == [p.prompt for p in test]
    other = MazeTask(grid_size=7, num_train=300, num_test=100, seed=2)
    assert [p.prompt for p in other.problems("test")] != [p.prompt for p in test]


@pytest.mark.parametrize(
    "kwargs",
    [{"grid_size": 8}, {"grid_size": 3}, {"grid_size": 9.0}, {"num_test": 0}, {"num_train": -1}],
)
def test_bad_arguments_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        MazeTask(**kwargs)


def test_the_task_gives_room_for_its_longest_path():
    """Without --max-new-tokens, eval / rare-set / train take the task's limit: a simple path
    of a 17x17 grid (8x8 cells) has up to 63 moves, then END and EOS; a flat 32 would make
    every longer maze unsolvable."""
    from fgrpo_llm.cli.common import max_new_tokens_for

    task = MazeTask(grid_size=17, num_train=1, num_test=1)
    assert task.max_new_tokens == 65 == max_new_tokens_for(task, None)
    mazes = MazeTask(grid_size=17, num_train=1, num_test=200).problems("test")
    longest = max(p.meta["path_length"] for p in mazes)  # moves
    assert 32 < longest + 2 <= task.max_new_tokens  # + END + EOS
    assert max_new_tokens_for(task, 7) == 7


def test_too_many_mazes_for_a_tiny_grid_raises():
    # 2x2 cells: 4 spanning trees x 12 (start, goal) pairs = 48 distinct mazes at most
    with pytest.raises(ValueError, match="distinct"):
        MazeTask(grid_size=5, num_train=100, num_test=10).problems("train")


def test_bad_prompt_raises_value_error():
    with pytest.raises(ValueError):
        decode_prompt("# # # >")  # not a square
    with pytest.raises(ValueError):
        decode_prompt("# . . # >")  # square, but no S and G
    with pytest.raises(ValueError):
        decode_prompt("no answer mark")


# -- the experiment pipeline -----------------------------------------------------------------

TINY = dict(
    grid_size=7,
    num_train=60,
    num_test=3,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    sft_steps=3,
    sft_batch_size=4,
    rl_steps=2,
    rl_prompts_per_step=2,
    group_sizes=(2,),
    gammas=(0.0, 1.0),
    eval_k_max=4,
    eval_every=1,
    device="cpu",
)


def test_config_validation_and_presets():
    from fgrpo_llm.experiments.maze.config import make_config

    full = make_config("full")
    assert (full.grid_size, full.sft_steps, full.sft_batch_size, full.rl_prompts_per_step) == (
        17,
        1500,
        32,
        256,
    )
    assert full.group_sizes == (4, 8, 16, 32, 64, 128) and full.gammas == (0.0, 0.5, 1.0)
    assert full.eval_k_max == 2048 and full.num_test == 256 and full.rl_steps == 20_000
    reduced = make_config("reduced")
    assert reduced.grid_size < full.grid_size and reduced.rl_steps < full.rl_steps
    assert make_config("reduced", eval_k_max=100).ks[-1] == 100
    # one seed unless told; every F-GRPO gamma gets its lr-matched control; one thread
    assert reduced.rl_seeds == (0,) and make_config("reduced", seed=3).rl_seeds == (3,)
    assert reduced.lr_matched_gammas == (0.5, 1.0) and reduced.threads == 1
    assert make_config("reduced", gammas=(0.0, 1.0)).lr_matched_gammas == (1.0,)
    assert make_config("reduced", lr_matched_gammas=()).lr_matched_gammas == ()
    for bad in (
        {"grid_size": 8},
        {"group_sizes": (1,)},
        {"gammas": (-1.0,)},
        {"rl_lr": 0.0},
        {"bogus": 1},
        {"rl_seeds": (1, 1)},
        {"rl_seeds": (-1,)},
        {"rl_seeds": ()},
        {"threads": 0},
        {"lr_matched_gammas": (0.3,)},
        {"lr_matched_gammas": (0.0,)},
        {"group_sizes": (4, 4)},
        {"gammas": "0,1"},
    ):
        with pytest.raises(
            ValueError, match=next(iter(bad)) if next(iter(bad)) != "bogus" else "bogus"
        ):
            make_config("reduced", **bad)
    with pytest.raises(ValueError, match="preset"):
        make_config("huge")


def test_config_fields_follow_the_shared_rules():
    """MAZE_RULES (fgrpo_common.fields): numbers written as text (a YAML --config file) are read
    as numbers and numpy values become Python numbers; a bool is never a number, a float (even
    5.0) never an integer; every bad value is one ValueError naming the field and the value."""
    from fgrpo_llm.experiments.maze.config import make_config

    cfg = make_config(
        "reduced",
        rl_steps="5",
        sft_lr="1e-3",
        gammas=["0", "1"],
        group_sizes=np.array([4, 8]),
        seed=np.int64(2),
    )
    assert (cfg.rl_steps, cfg.sft_lr, cfg.gammas, cfg.group_sizes) == (5, 1e-3, (0.0, 1.0), (4, 8))
    assert cfg.rl_seeds == (2,) and cfg.lr_matched_gammas == (1.0,)
    assert type(cfg.seed) is type(cfg.group_sizes[0]) is int and type(cfg.gammas[0]) is float
    for bad, message in (
        ({"rl_steps": 5.0}, r"rl_steps must be an integer >= 1, got rl_steps=5\.0"),
        ({"grid_size": True}, r"grid_size must be an integer >= 5, got grid_size=True"),
        (
            {"group_sizes": (4, 8.0)},
            r"group_sizes\[1\] must be an integer >= 2, got group_sizes\[1\]=8\.0",
        ),
        (
            {"rl_seeds": (0, True)},
            r"rl_seeds\[1\] must be an integer >= 0 and <= 9223372036854775807, "
            r"got rl_seeds\[1\]=True",
        ),
        ({"rl_lr": True}, r"rl_lr must be a finite number > 0, got rl_lr=True"),
        ({"sft_lr": "fast"}, r"sft_lr must be a finite number > 0, got sft_lr='fast'"),
        (
            {"lr_matched_gammas": (1, 0)},
            r"lr_matched_gammas\[1\] must be a finite number > 0, got lr_matched_gammas\[1\]=0",
        ),
        ({"device": 0}, r"device must be None or a non-empty string, got device=0"),
    ):
        with pytest.raises(ValueError, match=f"^{message}$"):
            make_config("reduced", **bad)


def test_plan_runs_every_method_at_every_n_for_every_seed():
    from fgrpo_llm.config import TrainConfig
    from fgrpo_llm.experiments.maze.config import make_config, plan
    from fgrpo_llm.experiments.maze.stages import train_config

    cfg = make_config("reduced", rl_seeds=(0, 1), group_sizes=(4, 8))
    runs = plan(cfg)
    assert len(runs) == 2 * 2 * 5 and len({r.key for r in runs}) == len(runs)
    assert {r.method for r in runs} == {
        "GRPO",
        "F-GRPO gamma=0.5",
        "F-GRPO gamma=1.0",
        "GRPO lr x m(gamma=0.5)",
        "GRPO lr x m(gamma=1.0)",
    }
    by_name = {r.key: r for r in runs}
    control = by_name["seed1/grpo_lrm_g1_N8"]
    tc = train_config(cfg, Path("sft"), Path("x"), control)
    assert isinstance(tc, TrainConfig) and tc.gamma == 0.0 and tc.seed == 1 and tc.group_size == 8
    assert tc.effective_lr == pytest.approx(cfg.rl_lr * 0.5)  # m_1 = 1/2
    half = train_config(cfg, Path("sft"), Path("x"), by_name["seed0/grpo_lrm_g0.5_N4"])
    assert half.effective_lr == pytest.approx(cfg.rl_lr * 0.6791, rel=1e-3)
    fgrpo = train_config(cfg, Path("sft"), Path("x"), by_name["seed0/fgrpo_g0.5_N4"])
    assert fgrpo.gamma == 0.5 and fgrpo.effective_lr == cfg.rl_lr and fgrpo.seed == 0
    # the mazes come from the one data seed, whatever the RL seed
    assert tc.task_kwargs["seed"] == cfg.seed == fgrpo.task_kwargs["seed"]


def test_sft_batch_masks_everything_but_the_target():
    from fgrpo_llm.experiments.maze.stages import sft_batch
    from fgrpo_llm.tasks.maze import VOCAB
    from fgrpo_llm.tokenizer import build_word_tokenizer

    tok = build_word_tokenizer(list(VOCAB))
    task = MazeTask(grid_size=7, num_train=10, num_test=2, seed=0)
    by_prompt = {p.prompt: p for p in task.problems("train")}
    ids, mask, labels = sft_batch(tok, task, task.problems("train"), np.random.default_rng(0), 4)
    for b in range(4):  # (B, T) each
        on_target = labels[b] != -100
        assert (labels[b][on_target] == ids[b][on_target]).all()
        target = labels[b][on_target].tolist()
        assert target[-1] == tok.eos_token_id
        prompt = tok.decode(ids[b][mask[b].bool() & ~on_target].tolist(), skip_special_tokens=True)
        problem = by_prompt[prompt]  # everything before the target is <bos> + a training prompt
        assert task.reward(problem, tok.decode(target[:-1])) == 1.0


def test_dip_statistics_finds_the_drop_and_the_recovery():
    from fgrpo_llm.experiments.maze.stages import dip_statistics

    curve = [
        {"step": s, "eval/test/pass@1": v} for s, v in [(0, 0.5), (10, 0.3), (20, 0.4), (30, 0.6)]
    ]
    d = dip_statistics(curve, [1])
    assert d["dip/pass@1"] == pytest.approx(0.2) and d["dip_step/pass@1"] == 10
    assert d["change/pass@1"] == pytest.approx(0.1)
    rising = [{"step": s, "eval/test/pass@1": v} for s, v in [(0, 0.1), (10, 0.2)]]
    assert dip_statistics(rising, [1])["dip/pass@1"] == 0.0


def test_pipeline_smoke_run_and_stage_resume(tmp_path):
    import torch

    from fgrpo_llm.experiments.maze.config import make_config
    from fgrpo_llm.experiments.maze.pipeline import run_experiment

    cfg = make_config("reduced", **TINY)
    out = tmp_path / "maze"
    threads = torch.get_num_threads()
    results = run_experiment(cfg, out, progress=False)
    assert torch.get_num_threads() == threads  # the caller's thread count is restored
    assert set(results["runs"]) == {"seed0/grpo_N2", "seed0/fgrpo_g1_N2", "seed0/grpo_lrm_g1_N2"}
    for run in results["runs"].values():
        assert run["torch_threads"] == cfg.threads == 1
        steps = [c["step"] for c in run["curve"]]
        assert steps == [0, 1, 2]  # step 0 is the SFT model, then every eval_every step
        for c in run["curve"]:
            ks = [c[f"eval/test/pass@{k}"] for k in (1, 2, 4)]
            assert all(0 <= v <= 1 for v in ks) and ks == sorted(ks)  # non-decreasing in k
    assert results["runs"]["seed0/grpo_lrm_g1_N2"]["lr"] == pytest.approx(cfg.rl_lr / 2)
    assert json.loads((out / "config.json").read_text())["grid_size"] == 7
    from fgrpo_llm.tasks.for_model import recorded_task

    assert recorded_task(out / "sft" / "model") == "maze"  # another task is refused on it
    for name in (
        "results.json",
        "table.csv",
        "table.md",
        "report.md",
        "report.json",
        "maze_curves.png",
        "maze_final.png",
        "timings.json",
        "units.csv",
    ):
        assert (out / name).is_file(), name
    from fgrpo_llm.experiments.maze.units import judge_units

    assert judge_units(out / "units.csv", cfg) == results["study"]["claims"]
    rows = results["table"]
    assert {r["metric"] for r in rows} == {"pass@1", "pass@4"}
    assert rows[0]["paper GRPO"] is None  # N = 2 is not in Table 4
    assert "One seed: no interval" in (out / "report.md").read_text()
    timings = json.loads((out / "timings.json").read_text())
    assert set(timings["stages"]) >= {"sft", "sft_eval/seed0", "rl/seed0/grpo_N2"}
    # Stage resume: finished stages are reused; a new gamma and a new seed run only their runs.
    sft_mtime = (out / "sft" / "model" / "model.safetensors").stat().st_mtime
    more_cfg = make_config("reduced", **{**TINY, "gammas": (0.0, 0.5, 1.0), "rl_seeds": (0, 1)})
    more = run_experiment(more_cfg, out, progress=False)
    assert set(more["runs"]) == {
        f"seed{s}/{n}"
        for s in (0, 1)
        for n in ("grpo_N2", "fgrpo_g0.5_N2", "fgrpo_g1_N2", "grpo_lrm_g0.5_N2", "grpo_lrm_g1_N2")
    }
    assert (out / "sft" / "model" / "model.safetensors").stat().st_mtime == sft_mtime
    assert more["runs"]["seed0/grpo_N2"] == results["runs"]["seed0/grpo_N2"]
    assert set(json.loads((out / "timings.json").read_text())["stages"]) >= {
        "rl/seed0/grpo_N2",
        "rl/seed1/grpo_N2",
        "sft_eval/seed1",
    }
    with pytest.raises(ValueError, match="other settings"):
        run_experiment(make_config("reduced", **{**TINY, "rl_steps": 3}), out, progress=False)
    with pytest.raises(ValueError, match="threads"):
        run_experiment(make_config("reduced", **{**TINY, "threads": 2}), out, progress=False)
    with pytest.raises(ValueError, match="workers"):
        run_experiment(cfg, out, workers=0)


def test_cli_bad_arguments_exit_2(tmp_path, capsys):
    from fgrpo_llm.cli import main

    for argv, word in (
        (["--preset", "huge"], "preset"),
        (["--grid-size", "8"], "grid_size"),
        (["--seeds", "1,1"], "rl_seeds"),
        (["--workers", "0"], "workers"),
        (["--lr-matched-gammas", "0.3"], "lr_matched_gammas"),
        (["--threads", "0"], "threads"),
    ):
        assert main(["maze", *argv, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert word in err and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "x").exists()  # nothing written before the settings are checked


def test_cli_runs_a_tiny_study_and_prints_its_report(tmp_path, capsys):
    from fgrpo_llm.cli import main

    out = tmp_path / "m"
    argv = [
        "maze",
        "--out",
        str(out),
        "--grid-size",
        "7",
        "--num-train",
        "60",
        "--num-test",
        "3",
        "--hidden-size",
        "32",
        "--num-layers",
        "1",
        "--num-heads",
        "2",
        "--sft-steps",
        "3",
        "--sft-batch-size",
        "4",
        "--rl-steps",
        "1",
        "--prompts-per-step",
        "2",
        "--group-size",
        "2",
        "--gamma",
        "0,1",
        "--lr-matched-gammas",
        ",",
        "--k-max",
        "2",
        "--eval-every",
        "1",
        "--seeds",
        "4,5",
        "--workers",
        "1",
        "--device",
        "cpu",
        "--no-progress",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "# Maze study: 2 RL seed(s)" in printed and "4 RL runs" in printed
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["rl_seeds"] == [4, 5] and cfg["lr_matched_gammas"] == [] and cfg["seed"] == 0
    assert sorted(p.parent.name for p in out.glob("rl/*/*/result.json")) == [
        "fgrpo_g1_N2",
        "fgrpo_g1_N2",
        "grpo_N2",
        "grpo_N2",
    ]
