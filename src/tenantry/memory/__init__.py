"""Facility memory: lessons with provenance, trust, verification and history.

See docs/memory.md. The public pieces are re-exported here.
"""

from tenantry.memory.component import MemoryService, create
from tenantry.memory.models import Kind, Lesson, Scope, Source, Status, Trust
from tenantry.memory.probes import FakeProber, PartitionInfo, Prober, SlurmProber, SubmitCheck
from tenantry.memory.retrieval import Hit, Viewer, search
from tenantry.memory.store import LessonStore

__all__ = [
    "FakeProber",
    "Hit",
    "Kind",
    "Lesson",
    "LessonStore",
    "MemoryService",
    "PartitionInfo",
    "Prober",
    "Scope",
    "SlurmProber",
    "Source",
    "Status",
    "SubmitCheck",
    "Trust",
    "Viewer",
    "create",
    "search",
]
