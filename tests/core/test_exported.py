"""The public API is explicit: everything in __all__ exists and nothing else leaks."""

from __future__ import annotations

import tenantry


def test_all_exports_exist() -> None:
    for name in tenantry.__all__:
        assert hasattr(tenantry, name), name


def test_no_unlisted_public_names() -> None:
    public = {n for n in vars(tenantry) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(tenantry, n)).__name__ == "module"}
    assert public - modules == set(tenantry.__all__) - {"__version__"}
