"""The batched torch engine (paper Section 5.1, App. J) on CPU torch: a run's numbers do not
depend on the batch it runs in; every option runs; bad devices are one clear error. (Its
agreement in distribution with the numpy engines: test_sim_agreement.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.sim import SimConfig, run_cached, run_sweep

torch = pytest.importorskip("torch")

CFG = SimConfig(
    actions=640,
    correct=50,
    group_sizes=(2, 16, 128),
    gammas=(0.0, 1.0),
    seeds=tuple(range(8)),
    steps=60,
    lr=3e-2,
)


def test_torch_engine_runs_do_not_depend_on_their_batch():
    from fgrpo_theory.sim.torch_engine import simulate_runs_torch

    runs = [(16, 0.0, 3), (128, 1.0, 1), (2, 1.0, 0)]
    together = simulate_runs_torch(CFG, runs, device="cpu")
    alone = simulate_runs_torch(CFG, runs[1:2], device="cpu")
    for key, a in alone[runs[1]].items():
        np.testing.assert_allclose(together[runs[1]][key], a, rtol=1e-12, atol=1e-15, err_msg=key)


@pytest.mark.parametrize(
    "options",
    [
        dict(surrogate="prob", advantage="raw", optimizer="sgd", lr=5.0),
        dict(advantage="grpo", optimizer="sgd"),
    ],
)
def test_torch_engine_runs_every_option(options):
    from dataclasses import replace

    cfg = replace(CFG, group_sizes=(16,), seeds=(0, 1), steps=10, **options)
    res = run_sweep(cfg, progress=False, engine="torch", device="cpu")
    assert np.all((res.records["q_pos"] > 0) & (res.records["q_pos"] < 1))
    assert np.isfinite(res.records["entropy"]).all()


def test_torch_results_are_cached_apart_from_numpy_results(tmp_path):
    from dataclasses import replace

    cfg = replace(CFG, group_sizes=(4,), seeds=(0,), steps=3)
    a = run_cached(cfg, tmp_path, progress=False, engine="torch", device="cpu")
    b = run_cached(cfg, tmp_path, progress=False)  # not torch's cache
    assert not np.array_equal(a.records["q_pos"], b.records["q_pos"])


@pytest.mark.parametrize("device", ["tpu:0", "no-such-device", "cuda:99"])
def test_bad_device_is_a_value_error(device):
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ValueError, match="device"):
        run_sweep(CFG, progress=False, engine="torch", device=device)
