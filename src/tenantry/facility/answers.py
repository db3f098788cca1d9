"""The facility service's policy answers an executor keeps for its agents' hooks.

Before every shell command an agent's hook asks ``policy.check``; in facility
mode the executor forwards it to the service, a round trip to a busy service
for an ``ls``. ``KeptAnswers`` keeps the answers the service marks reusable
(``safety.policy.reuse``: allows of well-formed requests whose looks the
executor can make again) and answers the same request again from them:

- keyed on the exact request: the principal as the executor forwards it and
  the op's params, as JSON;
- each kept answer carries the policy version it was given under; only the
  version the service last announced (the ``policy`` of its ``facility.stops``
  long poll, which returns at once when the policy, its facts or the kill
  switch move) is served, and a new version, a kill-switch change or a broken
  long poll drops everything kept (``announce``, ``forget``);
- an answer is served until the end of the service's clock hour, and only if
  the file-system looks it rests on give the same results here and now
  (``reuse.holds``): a changed symlink asks the service again.

A denial is never kept, so no kept answer turns a denial into an allow.
Bounded (``SIZE`` entries, the oldest go first).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import time
from typing import Any

from tenantry.core.models import Principal
from tenantry.safety.policy import reuse

OP = "policy.check"
SIZE = 4096


@dataclasses.dataclass(slots=True)
class Kept:
    answer: str  # the result as JSON (each hit gets its own copy)
    until: float
    looks: list[Any]


class KeptAnswers:
    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self.version: str | None = None  # None: nothing announced yet, nothing served
        self._stops = -1
        self._kept: collections.OrderedDict[str, Kept] = collections.OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._kept)

    @staticmethod
    def key(principal: Principal, params: dict[str, Any]) -> str | None:
        try:
            return json.dumps(
                [dataclasses.astuple(principal), params], sort_keys=True, separators=(",", ":")
            )
        except (TypeError, ValueError):
            return None

    def announce(self, version: str | None, stops: int) -> None:
        """The policy version the service answers under now ("" or None: keep nothing)
        and its kill switch's version; a change of either drops what was kept."""
        if (version or None, stops) != (self.version, self._stops):
            self._kept.clear()
        self.version, self._stops = version or None, stops

    def forget(self) -> None:
        """The service may have moved unseen (its long poll broke): keep nothing."""
        self._kept.clear()
        self.version = None

    def get(self, key: str) -> dict[str, Any] | None:
        kept = self._kept.get(key)
        if kept is None or self.version is None:
            self.misses += 1
            return None
        if time.time() >= kept.until or not reuse.holds(kept.looks):
            del self._kept[key]
            self.misses += 1
            return None
        self._kept.move_to_end(key)
        self.hits += 1
        answer = json.loads(kept.answer)
        return answer if isinstance(answer, dict) else None

    def put(self, key: str, result: Any) -> None:
        """Keep ``result`` (the service's answer, its ``reuse`` taken out) if it says so."""
        if not isinstance(result, dict):
            return
        described = result.pop("reuse", None)
        if self.version is None or not isinstance(described, dict):
            return
        if described.get("version") != self.version or result.get("decision") != "allow":
            return
        until = described.get("until")
        if not isinstance(until, int | float) or until <= time.time():
            return
        looks = described.get("looks")
        if not isinstance(looks, list):
            return
        self._kept[key] = Kept(json.dumps(result), float(until), looks)
        self._kept.move_to_end(key)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

    def health(self) -> dict[str, Any]:
        return {"kept": len(self._kept), "hits": self.hits, "misses": self.misses}
