"""The facility-day benchmark's modules live in bench/ (not a package): put it on sys.path.

Appended, not prepended: nothing installed or in the standard library is shadowed by a
bench script's name.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = str(Path(__file__).resolve().parents[2] / "bench")
if BENCH not in sys.path:
    sys.path.append(BENCH)
