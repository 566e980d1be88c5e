"""The TRL versions ``FocalGRPOTrainer`` was tested with, and the check that refuses others (it
hooks private methods of TRL's ``GRPOTrainer``)."""

from __future__ import annotations

import os

__all__ = ["TESTED_TRL", "check_trl_version"]

#: The TRL versions this trainer was tested with (``make test-engines``): [_LOW, _HIGH).
_LOW, _HIGH = "1.16", "1.17"
TESTED_TRL = f">={_LOW},<{_HIGH}"


def check_trl_version(version: str | None = None) -> str:
    """The installed TRL version, or an ImportError when it is outside :data:`TESTED_TRL`."""
    from packaging.version import Version

    if version is None:
        import trl

        version = trl.__version__
    v = Version(version)
    if (
        not Version(_LOW) <= v < Version(_HIGH)
        and os.environ.get("FGRPO_ALLOW_UNTESTED_TRL") != "1"
    ):
        raise ImportError(
            f"FocalGRPOTrainer hooks private methods of TRL's GRPOTrainer and was tested with trl "
            f"{TESTED_TRL}; found trl {version}. Install a tested version (pip install "
            f"'trl{TESTED_TRL}') or set FGRPO_ALLOW_UNTESTED_TRL=1 to try at your own risk."
        )
    return version
