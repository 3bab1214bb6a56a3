#!/usr/bin/env python
"""Train one cfg with Darknet's own CLI and with our trainer, evaluate both on held-out images. The code is in
tests/darknet_ref/side_by_side.py, beside the Darknet build it uses (a clone with ../shared/darknet only, so it is
not an installed command); ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

import sys

sys.path.insert(0, str(_launch.REPO / "tests"))  # the Darknet reference harness lives with the tests
if {"-h", "--help"} & set(sys.argv[1:]):  # from the parser alone, without torch (prints and exits)
    from darknet_ref.side_by_side_flags import parse_args  # noqa: E402

    parse_args(sys.argv[1:])

from darknet_ref.side_by_side import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
