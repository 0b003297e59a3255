"""`python -m rlvr` is the `rlvr` command."""

import sys

from rlvr.cli import main

sys.exit(main())
