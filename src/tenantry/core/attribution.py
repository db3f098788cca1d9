"""Attribution tags carried in a Slurm job's comment (never AdminComment).

Format (version 1), one ASCII line, fields separated by ``;``::

    tenantry:v1;agent=claude-code;session=3f2a...;user=alice;project=chem;job=t-12

Values are percent-encoded (``%3B`` for ``;``, ``%3D`` for ``=``, ``%25``), so
the tag survives any session id. A comment may hold other text around the tag;
``parse`` finds the tag anywhere in it. Standard library only: the report
reads these from accounting dumps.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from tenantry.core.models import Principal

PREFIX = "tenantry:v1"
_TAG = re.compile(r"tenantry:v1((?:;[a-z_]+=[^;\s|]*)*)")
FIELDS = ("agent", "session", "user", "project", "job", "req")


def encode(principal: Principal, job_id: str = "", intent: str = "") -> str:
    """The comment tag for a job submitted by ``principal``.

    ``intent`` (field ``req``) is a token unique to one journaled submission:
    a daemon restarted after a crash finds the job by it instead of submitting
    it again.
    """
    values = {
        "agent": principal.agent.value,
        "session": principal.session,
        "user": principal.user,
        "project": principal.project,
        "job": job_id,
        "req": intent,
    }
    parts = [PREFIX] + [f"{k}={quote(v, safe='')}" for k, v in values.items() if v]
    return ";".join(parts)


def parse(comment: str | None) -> dict[str, str] | None:
    """The tag's fields, or None when the comment carries no Tenantry tag."""
    if not comment:
        return None
    m = _TAG.search(comment)
    if m is None:
        return None
    out: dict[str, str] = {}
    for part in m.group(1).split(";"):
        if "=" in part:
            key, _, value = part.partition("=")
            out[key] = unquote(value)
    return out
