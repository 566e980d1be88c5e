"""``python -m fgrpo_theory.cli``: the same as the ``fgrpo-theory`` command."""

import sys

from fgrpo_theory.cli import main

sys.exit(main())
