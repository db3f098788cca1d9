"""``python -m tenantry.agents.shims NAME ARGS...``: run one shim (as the wrappers do)."""

from __future__ import annotations

import os
import sys

from tenantry.agents.shims.entry import NAMES, main

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in NAMES:
        sys.stderr.write(
            f"usage: python -m tenantry.agents.shims {{{','.join(NAMES)}}} [ARGS...]\n"
        )
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:], shim_dir=os.environ.get("TENANTRY_SHIM_DIR", "")))
