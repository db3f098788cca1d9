"""Compatibility name: the runtime lives in ``tenantry.service.runtime``.

Import ``Runtime`` and ``Component`` from ``tenantry.service.runtime``; a
concept that imports this module depends on the gateway (a surface) and
breaks the layer contract in ``pyproject.toml``.
"""

from tenantry.service.runtime import Component, Runtime

__all__ = ["Component", "Runtime"]
