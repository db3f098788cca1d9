"""Characterization: agent vs human workload from accounting logs and telemetry.

Pipeline: ``sources.load`` (sacct dumps, ``sacct --json``, SWF, Tenantry's store)
-> ``metrics.build`` (window, classification, every measurement) -> a renderer
(``render_html``, ``render_markdown``, ``render_data``). ``simulate`` generates
labelled traces calibrated to the paper. Import submodules directly; this
package's top level stays light.
"""

from __future__ import annotations

__all__ = [
    "actions",
    "behaviour",
    "classify",
    "figures",
    "files",
    "ingest_jobcomp",
    "ingest_json",
    "ingest_pbs",
    "ingest_sacct",
    "ingest_swf",
    "ingest_telemetry",
    "ingest_transcripts",
    "live",
    "metrics",
    "render_data",
    "render_html",
    "render_markdown",
    "sacct_repair",
    "schema",
    "simulate",
    "simulate_humans",
    "simulate_write",
    "slurm_fields",
    "sources",
    "tables",
    "window",
]
