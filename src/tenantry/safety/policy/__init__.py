"""Agents as principals under policy: Cedar decisions on normalized requests.

``Judge`` decides (normalizers + Cedar engine) and is what ``tenantry policy
test`` and the benchmark use; ``PolicyService`` is the daemon component the
gateway calls for every op that declares an action. Names load lazily: the
CLI imports ``tenantry.safety.policy.cli`` and must not pull in Cedar or tree-sitter.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tenantry.safety.policy.component import PolicyService
    from tenantry.safety.policy.engine import Engine
    from tenantry.safety.policy.facts import Facts
    from tenantry.safety.policy.judge import Decision, Judge

_LAZY = {
    "Decision": "tenantry.safety.policy.judge",
    "Engine": "tenantry.safety.policy.engine",
    "Facts": "tenantry.safety.policy.facts",
    "Judge": "tenantry.safety.policy.judge",
    "PolicyService": "tenantry.safety.policy.component",
}

__all__ = ["Decision", "Engine", "Facts", "Judge", "PolicyService"]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tenantry.safety.policy' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
