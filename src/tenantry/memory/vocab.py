"""Query expansion: everyday words for the facility's vocabulary. Pure functions.

People and agents describe a problem in their own words ("we ran out of
compute hours", "skip the queue", "my home folder is full"); lessons use the
facility's words (allocation, preempt partition, quota). ``expand`` maps the
first onto the second: each entry is a pattern over the lower-cased query and
the terms it adds. Expanded terms feed a second lexical ranking that is fused
with the plain one by rank (see ``retrieval``), so an expansion can add
candidates but never outweighs the words the query really used.

The table is plain data: a facility extends it with its own names (QOS,
partitions, file systems) through the ``memory_synonyms`` setting, a file of
``pattern = term term ...`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tenantry.memory import terms

_DEFAULT: tuple[tuple[str, str], ...] = (
    # money and allocation
    (
        r"\bbill(?:ing|ed)?\b|\bcharg(?:e|ed|ing)\b|\bcosts?\b|\bpay\b|\bbudget\b|\bcredits?\b"
        r"|\bservice units?\b",
        "account allocation charged core hours",
    ),
    (
        r"\b(?:compute|cpu|core|gpu|node)[ -]hours?\b|\bhours left\b|\bused up\b|\bran out of\b"
        r"|\brun out of\b|\bexhausted\b",
        "allocation usage sshare account",
    ),
    # waiting in the queue
    (
        r"\bskip(?:ping)? the (?:queue|line)\b|\bjump the queue\b"
        r"|\bstart (?:sooner|faster|earlier)\b"
        r"|\bwait(?:ing)? (?:less|forever|so long|for (?:its|my) turn)\b|\bstuck in the queue\b",
        "pending priority backfill preempt",
    ),
    (r"\binterrupt(?:ed|ible)?\b|\bkicked off\b|\bcan be killed\b", "preempt requeue"),
    (r"\bpending for hours\b|\bwaits? forever\b|\bnot starting\b", "pending reason"),
    # hardware words
    (r"\bgraphics cards?\b|\baccelerators?\b|\bvideo cards?\b", "gpu"),
    (r"\bworker (?:machines?|nodes?)\b|\bcompute machines?\b", "compute node"),
    (r"\bfront[- ]?end\b|\bhead node\b|\blogin machine\b", "login node"),
    (r"\bprocessor cores?\b|\bphysical cores?\b|\bhardware threads?\b", "cpu core"),
    (r"\bmachine (?:running|crashed|died)\b|\bdisappeared\b|\bfell off\b", "node fail"),
    (r"\bhardware i asked\b|\bno machine\b|\bmatches the hardware\b", "node configuration"),
    # time
    (
        r"\bmaximum duration\b|\bhow long\b|\bhours i (?:reserved|asked)\b|\bwall clock\b"
        r"|\b(?:most of a |a )?week\b|\bfive days\b|\blonger than a day\b|\blast\b",
        "time limit walltime maxtime",
    ),
    (r"\bsave (?:state|a checkpoint)\b|\bwarned\b|\bbefore .* kills\b", "checkpoint signal"),
    (r"\brecurring\b|\bevery (?:night|day|hour)\b|\bnightly\b|\bperiodically\b", "scrontab cron"),
    (r"\bnotif(?:y|ied)\b|\bemail\b", "mail type"),
    # storage
    (
        r"\bpersonal (?:storage|space)\b|\bhome (?:folder|directory|space)\b|\bmy home\b",
        "home quota",
    ),
    (r"\bdisk is full\b|\bno room\b|\bno space\b|\bstorage (?:is )?full\b", "quota space"),
    (r"\bnumber of files\b|\bfile count\b|\btoo many files\b", "files inode quota"),
    (
        r"\bdeleted automatically\b|\bremoved automatically\b|\bwiped\b|\bcleaned up\b",
        "purge scratch",
    ),
    (r"\bfast (?:file ?system|filesystem|storage)\b|\btemporary (?:data|files)\b", "scratch"),
    (r"\bparallel (?:file ?system|filesystem)\b", "lustre"),
    (
        r"\bundo\b|\brecover\b|\baccidental(?:ly)?\b|\bdeleted yesterday\b",
        "snapshots backup restore",
    ),
    (r"\bcolleagues?\b|\blabmates?\b|\bgroup members?\b", "group project permission"),
    (r"\bhuge dataset\b|\bterabytes?\b|\bmove (?:a )?(?:huge )?data\w*\b", "transfer globus dtn"),
    (r"\binterrupted\b|\bresume\b", "rsync partial"),
    # software and environments
    (r"\bmessage passing\b", "mpi"),
    (r"\bprocess(?:es)?\b|\branks?\b", "mpi task"),
    (r"\bthreads?\b|\bmultithread\w*\b", "omp cpus per task"),
    (r"\bpython environments?\b|\benvironment activation\b", "conda venv environment activate"),
    (r"\bversion control\b", "git"),
    (r"\bdocker\b", "apptainer container image"),
    (r"\bnotebooks?\b|\bin a browser\b", "jupyter ondemand"),
    (r"\bgraphical\b|\bgui\b|\bdisplay windows\b", "x11 desktop ondemand"),
    (r"\bresolv\w* dependencies\b|\bdependencies resolv\w*\b", "solving environment conda"),
    (r"\binteractive\b|\btype commands directly\b", "salloc srun pty interactive"),
    (r"\bwatch\b|\binspect\b|\blook at\b", "srun overlap"),
    (r"\bidle\b|\butili[sz]ation\b", "gpu utilization"),
    (r"\bc library\b", "glibc"),
    (r"\bprebuilt binary\b|\bbinary package\b", "wheel manylinux"),
    (r"\binvalid instruction\b", "illegal instruction"),
    (r"\boffline\b|\bno (?:internet|network)\b|\bwithout (?:internet|network)\b", "network"),
    (r"\bheavy build\b|\bcompil\w*\b", "make build compile"),
    (r"\bpackage name\b|\bcannot find the package\b", "module unknown"),
    (r"\bflood\w*\b|\bat the same time\b|\bconcurrent\b|\bat once\b", "array throttle"),
    (r"\bsweeps?\b|\bthousands of\b|\bmany small\b|\btiny jobs\b", "array job"),
    (r"\bmemory flags\b|\bmemory options\b", "mem mem per cpu"),
    (r"\bnew (?:student|user|member)\b|\bget access\b|\bget added\b", "account portal pi"),
    (r"\bwaste\w*\b|\befficien\w*\b", "efficiency seff"),
)

# The Slurm user documentation's own words for everyday ones (sbatch, srun, squeue,
# sacct and scontrol man pages; the job array, dependency and quota sections of a
# site user guide). Grouped by concept; each adds the documented terms.
_GLOSSARY: tuple[tuple[str, str], ...] = (
    (
        r"\bterminat\w*\b|\bstopped\b|\baborted\b|\bshut down\b|\bended early\b",
        "kill cancel",
    ),
    (
        r"\bonly after\b|\bonce (?:\w+ ){0,3}(?:finish|complete|succeed|is done)\w*"
        r"|\bwhen (?:job )?\w+ (?:finish|complete|succeed)\w*|\bchain\w*\b|\bpipelines?\b"
        r"|\bworkflows?\b|\bwait for (?:another|the other|a previous) job\b",
        "dependency afterok afterany",
    ),
    (
        r"\bsimultaneous\w*\b|\bin parallel\b|\bsame time\b|\bat once\b|\bconcurrent\w*\b",
        "array throttle",
    ),
    (r"\bparameter (?:sweep|scan|study)\b|\bmany similar\b|\bhundreds of\b", "array"),
    (
        r"\bbilling code\b|\bcharge code\b|\bproject code\b|\bcost cent(?:er|re)\b"
        r"|\bcharge (?:my|our|the) jobs?\b",
        "account",
    ),
    (
        r"\bhow much (?:storage|space|disk)\b|\b(?:storage|disk|space) (?:usage|used|left)\b"
        r"|\bstorage i am using\b|\bmy usage\b",
        "quota usage",
    ),
    (r"\bstorage\b|\bdisk space\b", "quota"),
    (r"\bfolders?\b", "directory"),
    (
        r"\bfast lane\b|\bquick tests?\b|\bshort tests?\b|\btrial runs?\b|\bsmoke tests?\b",
        "debug partition test",
    ),
    (
        r"\b(?:gpu|graphics card|video) memory\b|\bvram\b|\bfit (?:on|in|into) the (?:gpu|card)\b",
        "cuda memory",
    ),
    (r"\bterabytes? of memory\b|\btb of (?:ram|memory)\b|\blots of memory\b", "bigmem"),
    (
        r"\blog ?in(?:to)? (?:to )?(?:the )?(?:compute )?node\b|\bssh (?:in)?to (?:the |a )?node\b"
        r"|\bget a shell\b|\battach\b",
        "srun overlap pty",
    ),
    (r"\bssh\b|\blog ?in to the cluster\b|\bconnect to the cluster\b", "login ssh key"),
    (r"\bwhen will\b|\bexpected start\b|\bstart time\b", "start squeue"),
    (r"\bturn\b|\bahead of me\b|\bfair ?share\b", "priority fairshare"),
    (r"\bsoftware\b|\bapplications?\b|\bwhat versions\b|\bwhich versions\b", "module"),
    (r"\bcontinue from\b|\brestart\w*\b|\bpick up where\b", "checkpoint requeue"),
    (r"\bstandard partition\b|\bregular partition\b|\bnormal partition\b", "cpu partition"),
    (r"\bhardware threads?\b|\bhyper-?thread\w*\b|\bsmt\b", "hyperthreading core"),
)


# Everyday words for the option, command and reason-code names of the Slurm and Lmod
# documentation, one entry per documented concept. Sources: the DESCRIPTION and OPTIONS
# sections of sbatch(1) (--time, --array, --dependency, --exclusive, --requeue,
# --constraint, --exclude, --hold), squeue(1) JOB REASON CODES, sacct(1), scancel(1),
# scontrol(1) hold/release, and the Lmod user guide (module avail/spider, collections,
# module purge); and the SchedMD glossary of partitions (preemption) and cgroups.
_DOCS: tuple[tuple[str, str], ...] = (
    # sbatch --time: "a limit on the total run time of the job allocation"
    (r"\brun times?\b|\bduration\b|\bhow many (?:hours|days)\b", "time limit"),
    # sbatch --array: "multiple jobs to be executed with identical parameters"
    (r"\bidentical (?:jobs|parameters)\b|\bsame script (?:many|several) times\b", "array job"),
    # sbatch --dependency: "defer the start of this job until the dependencies are satisfied"
    (r"\bdefer\w*\b", "dependency"),
    # sbatch --exclusive: "the job allocation can not share nodes with other running jobs"
    (
        r"\bwhole nodes?\b|\bnot share (?:the |my )?nodes?\b|\bnodes? to (?:myself|itself)\b"
        r"|\bdedicated nodes?\b",
        "exclusive node",
    ),
    # sbatch --requeue: "the batch job should be eligible for requeuing"
    (
        r"\bautomatic(?:ally)? (?:retr|resubmi|rerun)\w*|\bretr(?:y|ied) (?:on|after) fail",
        "requeue",
    ),
    # sbatch --constraint: features assigned to nodes by the administrator
    (
        r"\b(?:cpu|processor) (?:type|generation|model|architecture)\b|\bnode (?:type|features?)\b",
        "constraint feature",
    ),
    # sbatch --hold, scontrol hold/release
    (r"\bpause\w*\b|\bon hold\b|\bhold (?:back|off)\b", "hold release"),
    # sacct: "accounting data for all jobs and job steps in the Slurm job accounting log"
    (r"\bjob history\b|\b(?:past|previous|finished|completed|old) jobs\b", "sacct accounting"),
    # scancel: "used to signal or cancel jobs"
    (r"\bremove (?:\w+ )?jobs? from the queue\b|\bkill (?:all )?(?:my|the) jobs?\b", "scancel"),
    # squeue reason codes Resources / Priority / ReqNodeNotAvail in plain words
    (r"\b(?:cluster|machine|queue) is (?:full|busy)\b|\bno free nodes\b", "pending resources"),
    (r"\bdown ?time\b|\bmaintenance\b|\bscheduled outage\b", "reservation maintenance"),
    # partitions with preemption: the scavenger / standby / low-priority pattern
    (
        r"\bscavenger\b|\bstandby\b|\blow[- ]priority (?:queue|partition|jobs?)\b"
        r"|\bfree (?:cycles|queue|partition)\b|\bspare (?:cycles|nodes)\b",
        "preempt partition",
    ),
    # cgroups enforce the memory a job requested (task/cgroup, ConstrainRAMSpace)
    (r"\bcgroups?\b|\btoo much (?:ram|memory)\b|\bmemory (?:limit|cap)\w*\b", "oom memory"),
    # Lmod: module avail / module spider list what can be loaded
    (
        r"\bwhat (?:software|modules?|packages) (?:is|are) (?:installed|available)\b"
        r"|\blist (?:the |all )?(?:installed |available )?software\b",
        "module avail spider",
    ),
    # Lmod collections (module save / restore) and module purge
    (r"\bsave (?:my|a set of) modules\b|\bsame modules every\b", "module collection restore"),
    (r"\bunload (?:everything|all)\b|\bclean (?:module )?environment\b", "module purge"),
)


def _literal_heads(pattern: str) -> tuple[str, ...] | None:
    """Lower-case words every match of ``pattern`` contains, one per top-level alternative.

    ``bill(?:ing)?|costs?`` -> ("bill", "cost"): a text containing none of them
    cannot match, so the regex is skipped (most rules, for most queries). None
    when some alternative does not start with a literal of two or more letters.
    """
    alternatives, depth, cur = [], 0, ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            cur += pattern[i : i + 2]
            i += 2
            continue
        depth += c == "("
        depth -= c == ")"
        if c == "|" and depth == 0:
            alternatives.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    alternatives.append(cur)
    heads = []
    for alt in alternatives:
        alt = alt.removeprefix("\\b")
        lit = ""
        for j, c in enumerate(alt):
            if not (c.isalnum() or c in " _-'"):
                break
            if j + 1 < len(alt) and alt[j + 1] in "?*{":
                break  # an optional character ends the part every match has
            lit += c
        if len(lit) < 2:
            return None
        heads.append(lit.lower())
    return tuple(heads)


class Expander:
    """Compiled expansion table: default entries plus the facility's own."""

    def __init__(
        self, entries: Iterable[tuple[str, str]] = (*_DEFAULT, *_GLOSSARY, *_DOCS)
    ) -> None:
        self._rules = [
            (re.compile(p, re.IGNORECASE), _literal_heads(p), terms.terms(t), t) for p, t in entries
        ]
        self._last: tuple[str, list[int]] = ("", [])

    @classmethod
    def with_file(cls, path: str | Path | None) -> Expander:
        """The default table extended with ``pattern = term term`` lines from ``path``."""
        entries = [*_DEFAULT, *_GLOSSARY, *_DOCS]
        if path:
            for line in Path(path).read_text().splitlines():
                if "=" in line and not line.lstrip().startswith("#"):
                    pattern, _, added = line.rpartition("=")
                    entries.append((pattern.strip(), added.strip()))
        return cls(entries)

    def _matching(self, text: str) -> list[int]:
        """Indexes of the rules ``text`` matches (the last text's answer is kept)."""
        if self._last[0] == text and text:
            return self._last[1]
        low = text.lower()
        hits = [
            i
            for i, (pattern, heads, _, _) in enumerate(self._rules)
            if (heads is None or any(h in low for h in heads)) and pattern.search(text)
        ]
        self._last = (text, hits)
        return hits

    def expand(self, text: str) -> list[str]:
        """Processed terms the query's own words imply (those it lacks, first-seen order)."""
        own = set(terms.terms(text))
        out: dict[str, None] = {}
        for i in self._matching(text):
            for t in self._rules[i][2]:
                if t not in own:
                    out[t] = None
        return list(out)

    def phrases(self, text: str) -> list[str]:
        """The table's words (as written, unprocessed) for the entries ``text`` matches."""
        return [self._rules[i][3] for i in self._matching(text)]


DEFAULT = Expander()
