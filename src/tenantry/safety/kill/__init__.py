"""The kill switch: stop and resume agent sessions."""

from __future__ import annotations

from tenantry.safety.kill.component import KillSwitch, Stop, create

__all__ = ["KillSwitch", "Stop", "create"]
