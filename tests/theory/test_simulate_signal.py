"""``fgrpo-theory simulate --out``: a SIGTERM while the figure is being written leaves no
temporary file in OUT (the write unwinds and removes it, exit status 143), and temporaries that
a SIGKILL left are removed by the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from fgrpo_theory.cli import main
from tests.theory.test_cli_simulate import TINY

ROOT = Path(__file__).resolve().parents[2]

KILLED_MID_WRITE = textwrap.dedent(
    """
    import os, signal, sys, time
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    real = Figure.savefig

    def savefig(self, fh, *a, **k):  # part of the PNG written, then the kill arrives
        fh.write(b"\\x89PNG partial")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        return real(self, fh, *a, **k)

    Figure.savefig = savefig
    from fgrpo_theory.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def test_a_sigterm_during_the_figure_write_leaves_no_temporary(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_MID_WRITE, "simulate", *TINY, "--workers", "1",
         "--out", str(out)],
        env=env, capture_output=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode in (128 + signal.SIGTERM, -signal.SIGTERM), proc.stderr[-2000:]
    assert proc.returncode == 128 + signal.SIGTERM  # unwound, not killed outright
    assert not [p.name for p in out.iterdir() if ".tmp-" in p.name]
    assert not (out / "fig2.png").exists()


def test_a_later_run_removes_the_temporaries_a_kill_left(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    stale = [out / ".fig2.png.tmp-0123456789ab", out / ".metrics.jsonl.tmp-abcdefabcdef"]
    for p in stale:
        p.write_bytes(b"partial")
    (out / ".notes.tmp-keep").write_text("not ours")
    assert main(["simulate", *TINY, "--workers", "1", "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert not any(p.exists() for p in stale)
    assert ".notes.tmp-keep" in names and "fig2.png" in names
