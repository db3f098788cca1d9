"""The public API is explicit: everything in __all__ exists and nothing else leaks."""

from __future__ import annotations

import tenantry


def test_all_exports_exist() -> None:
    for name in tenantry.__all__:
        assert hasattr(tenantry, name), name


def test_unknown_names_raise() -> None:
    import pytest

    with pytest.raises(AttributeError):
        _ = tenantry.NoSuchThing  # type: ignore[attr-defined]


def test_type_checking_imports_match_all() -> None:
    import ast
    from pathlib import Path

    tree = ast.parse(Path(tenantry.__file__).read_text())
    lazy = next(
        n
        for n in tree.body
        if isinstance(n, ast.AnnAssign | ast.Assign) and "_LAZY" in ast.unparse(n)
    )
    names = set(ast.literal_eval(ast.unparse(lazy.value)))  # type: ignore[arg-type]
    assert names | {"__version__"} == set(tenantry.__all__)
