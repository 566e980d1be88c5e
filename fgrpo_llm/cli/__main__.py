"""``python -m fgrpo_llm.cli``: the same as the ``fgrpo-llm`` command."""

import sys

from fgrpo_llm.cli import main

sys.exit(main())
