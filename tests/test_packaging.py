"""The release: what pyproject.toml declares (fast checks, read from the files) and, in the slow
test, what is built from it.

The slow test builds the sdist and the wheel (``python -m build``) with the declared setuptools
floor pinned, checks them with ``twine check --strict``, finds LICENSE, ``py.typed`` and the
presets in the wheel and every tracked test, test data, docs, example and notebook file in the
sdist, then installs the wheel alone into a fresh virtual environment (its dependencies from the
package index) and runs both commands' ``--version`` there, away from the source tree:

    python -m pytest -m slow tests/test_packaging.py
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fgrpo", "fgrpo_common", "fgrpo_theory", "fgrpo_llm")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def _setuptools_floor() -> str:
    (req,) = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    match = re.fullmatch(r"setuptools>=(\d+(?:\.\d+)*)", req)
    assert match, f"the build floor is not a plain floor: {req}"
    return match.group(1)


def test_the_build_floor_reads_an_spdx_license():
    """setuptools reads ``license = "MIT"`` (PEP 639) and ``license-files`` from 77 on."""
    assert tuple(map(int, _setuptools_floor().split("."))) >= (77,)
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_the_index_metadata_is_complete():
    assert PROJECT["authors"] and PROJECT["keywords"] and PROJECT["classifiers"]
    urls = PROJECT["urls"]
    assert {"Homepage", "Source", "Issues", "Changelog"} <= set(urls)
    assert urls["Paper"] == "https://arxiv.org/abs/2602.06717"
    assert "Typing :: Typed" in PROJECT["classifiers"]


def test_extras_have_floors_and_torch_no_cap():
    for extra, reqs in PROJECT["optional-dependencies"].items():
        for req in reqs:
            name = re.match(r"[A-Za-z0-9_.-]+", req).group(0)
            if name in ("cachetools", "fastapi", "uvicorn"):  # verl's own, unversioned there
                continue
            assert ">=" in req, f"the {extra} extra's {req} has no floor"
    (torch,) = [r for r in PROJECT["optional-dependencies"]["llm"] if r.startswith("torch")]
    assert "<" not in torch  # the CPU pin lives in the Makefile, not in the users' requirement
    assert {"build", "twine"} <= {
        re.match(r"[a-z]+", r).group(0) for r in PROJECT["optional-dependencies"]["dev"]
    }


def test_every_package_is_typed_and_ships_py_typed():
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    for pkg in PACKAGES:
        assert (ROOT / pkg / "py.typed").is_file()
        assert "py.typed" in data[pkg]


def test_the_presets_the_commands_name_are_package_data():
    data = PYPROJECT["tool"]["setuptools"]["package-data"]["fgrpo_llm.experiments.countdown"]
    assert "presets/*.yaml" in data
    presets = ROOT / "fgrpo_llm/experiments/countdown/presets"
    assert {p.stem for p in presets.glob("*.yaml")} >= {"gpu_full", "demo_cpu"}


def test_changelog_and_citation_name_this_version():
    version = PROJECT["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.M)
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["version"] == version and cff["license"] == "MIT"
    assert cff["repository-code"] == PROJECT["urls"]["Source"]
    paper = cff["preferred-citation"]
    assert "2602.06717" in paper["url"] and "F-GRPO" in paper["title"]


def _run(argv, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` that fails the test with the command's last lines of output."""
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        pytest.fail(f"{' '.join(map(str, argv))} exited {done.returncode}:\n{tail}")
    return done


def _tracked(*folders: str) -> set[str]:
    out = subprocess.run(
        ["git", "ls-files", *folders], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return {line for line in out.splitlines() if line}


def _untracked() -> set[str]:
    """New files git does not ignore (a change not yet committed is checked too)."""
    out = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line for line in out.splitlines() if line}


@pytest.mark.slow
def test_build_check_and_install_the_wheel_alone(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    src = tmp_path / "src"  # the files a clone holds (the build writes its egg-info beside them)
    for name in _tracked(".") | _untracked():
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    floor = tmp_path / "floor.txt"
    floor.write_text(f"setuptools=={_setuptools_floor()}\n")  # the build at the declared floor
    dist = tmp_path / "dist"
    env = {**os.environ, "PIP_CONSTRAINT": str(floor)}
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(src)], env=env, timeout=600)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)], timeout=120)

    names = set(zipfile.ZipFile(wheel).namelist())
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert {f"{pkg}/py.typed" for pkg in PACKAGES} <= names
    assert "fgrpo_llm/experiments/countdown/presets/gpu_full.yaml" in names

    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        held = {n[len(top) + 1 :] for n in tar.getnames()}
    wanted = _tracked("tests", "docs", "examples", "notebooks", "benchmarks", "constraints")
    wanted |= {"LICENSE", "README.md", "CHANGELOG.md", "CITATION.cff", "Makefile"}
    missing = sorted(wanted - held)
    assert not missing, f"the sdist lacks {missing[:10]}"
    assert any(n.startswith("tests/llm/data/") for n in held)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    # (without PYTHONPATH: a source tree on it may hold an fgrpo.egg-info, which pip would take
    # for an installed fgrpo)
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q", str(wheel)]
    _run(pip, env=alone, timeout=900)
    version = PROJECT["version"]
    for command in ("fgrpo-theory", "fgrpo-llm"):
        done = _run(
            [str(venv / "bin" / command), "--version"],
            cwd=tmp_path,  # away from the source tree
            env={"PATH": str(venv / "bin")},
            timeout=120,
        )
        assert done.stdout.strip() == f"{command} {version}"
