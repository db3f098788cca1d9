"""Retrieval: BM25 over FTS5, boosted by signature and subject matches, filtered.

Raw text (a pasted error, a question) becomes quoted terms joined by ``OR``
(see ``terms``), so quotes, colons and paths never break the FTS5 parser.
The rarest terms that fit a postings budget are scored by FTS5's BM25 (each
term's list once, then kept in memory: ``scored``); the
frequent ones (often the topical words) are not dropped but added through
their best postings, computed once per term and kept in memory
(``top_postings``), so the work stays bounded at 100k lessons. Two more
rankings are fused with that one (each list's scores scaled to its best,
then summed): the query expanded with the
facility vocabulary (``vocab``: "compute hours" -> allocation), and, when
the postings budget had to drop some of the query's terms, the *trusted
tier* -- a small second index of probe-verified and staff-approved lessons
where every term fits. Candidates also come straight from the error
signature index. The final score is BM25 (normalized to the best candidate)
plus boosts for an exact or near signature match and for subject keys that
the query mentions; stale lessons and candidates are nudged down, and stale or untrusted
lessons always rank below trusted, current ones.

Visibility is decided in SQL, before ranking: a principal sees facility
lessons, lessons of its project, its user's and its session's; it never sees
another principal's untrusted lessons, nor another principal's *sensitive*
lessons (``content``: downloads, credentials, privileges) unless staff
approved them, nor any quarantined lesson.
Superseded and retracted lessons are left out unless history is asked for,
and then they always rank below every live lesson.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any

from tenantry.core.models import Principal
from tenantry.memory import bm25, postings, scored, signature, terms, vocab
from tenantry.memory.models import Kind, Lesson, Status
from tenantry.memory.store import _COLUMNS, LessonStore, row_to_lesson
from tenantry.memory.vectors import VectorIndex
from tenantry.store.engine import Conn

Dense = Callable[[list[int]], dict[int, float]]  # store seqs -> similarity to the query

_L_COLUMNS = ", ".join("l." + c.strip() for c in _COLUMNS.split(","))
_BM25 = "bm25(lessons_fts, 3.0, 1.0, 2.0, 2.5)"

MAX_TERMS = 16  # rarest query terms kept
POSTINGS_BUDGET = 1000  # most postings BM25 scores per query (beyond the rarest term)
POOL = 25  # candidates ranked per source
PREFETCH = 60  # BM25 hits fetched before visibility filtering
PREFETCH_DENSE = 60  # the same with dense similarity (a larger prefetch measured no better)
W_TIER = 0.5  # weight of the trusted tier's own ranking when the budget starved the query
W_EXPANDED = 1.8  # weight of the expanded query's ranking (dev-tuned, see bench/memory.md)
TIER_TERMS = 32  # query terms asked of the trusted tier
TOP_PER_TERM = 400  # best postings kept per query term the budget leaves out (0 = off)
TOP_TERMS_CACHED = 2048  # terms whose best postings stay in memory (oldest dropped first)
SIG_POOL = 12  # lessons taken per exact signature match
DOCS_CACHED = 8192  # trusted lessons' indexed terms kept in memory (all dropped when full)

W_SIG_EXACT = 0.9
W_SIG_TRUST = 0.1  # extra per trust rank on an exact signature match
W_SIG_NEAR = 0.5
W_SUBJECT = 0.25
W_TRUST = 0.04
P_STALE = 0.3
P_CANDIDATE = 0.1

# dense re-ranking of the candidates, fused by reciprocal rank (see ``rerank_dense``)
RRF_K = 10
W_DENSE = 0.75
SYNC_INLINE = 64  # lessons a query embeds itself when the vector file lags the store


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who asks: the principal's key, user and project (visibility is decided on these)."""

    key: str
    user: str
    project: str = ""

    @classmethod
    def of(cls, principal: Principal) -> Viewer:
        return cls(principal.key, principal.user, principal.project)


@dataclass(slots=True)
class Hit:
    lesson: Lesson
    score: float
    matched: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = self.lesson.to_dict()
        d["score"] = round(self.score, 4)
        d["matched"] = list(self.matched)
        return d


def visibility(viewer: Viewer) -> tuple[str, list[Any]]:
    """SQL condition (on alias ``l``) for the lessons ``viewer`` may receive."""
    sql = (
        "l.quarantined = 0"
        " AND (l.scope = 'facility'"
        "  OR (l.scope = 'project' AND ? <> '' AND l.owner_project = ?)"
        "  OR (l.scope = 'user' AND l.owner_user = ?)"
        "  OR (l.scope = 'session' AND l.owner_key = ?))"
        " AND (l.owner_key = ? OR (l.trust_rank >= 1 AND (l.sensitive = 0 OR l.trust_rank >= 3)))"
    )
    return sql, [viewer.project, viewer.project, viewer.user, viewer.key, viewer.key]


def fuse(
    first: list[tuple[Lesson, float]], second: list[tuple[Lesson, float]], weight: float = 1.0
) -> list[tuple[Lesson, float]]:
    """Fuse two ranked lists: each list's scores scaled to its best, the second weighted.

    (Plain reciprocal-rank fusion throws away how far apart BM25 puts the
    candidates, which the boosts in ``rank`` are calibrated against; it measured
    worse on the labelled set, see bench/memory.md.)
    """
    score: dict[str, float] = {}
    lessons: dict[str, Lesson] = {}
    for ranked, w in ((first, 1.0), (second, weight)):
        best = max((x for _, x in ranked), default=0.0) or 1.0
        for les, x in ranked:
            lessons[les.id] = les
            score[les.id] = score.get(les.id, 0.0) + w * x / best
    order = sorted(score, key=score.__getitem__, reverse=True)
    return [(lessons[i], score[i]) for i in order]


def dense_text(text: str, expander: vocab.Expander) -> str:
    """The text whose vector stands for the query: its words and the vocabulary's words for them.

    A short question in everyday words ("compute hours") and a lesson in the
    facility's words (allocation, sshare) sit far apart in a static model; the
    expansion table's words for the query's own, appended as written, pull the
    query's vector towards the lessons that use them (see bench/memory.md).
    """
    added = expander.phrases(text)
    return text + " " + " ".join(added) if added else text


def choose_words(store: LessonStore, candidates: list[str]) -> list[str]:
    """The query terms worth asking FTS5 for: present in the index, rarest first.

    BM25 cost grows with the postings it scores, and a term found in many
    lessons adds little to the ranking, so terms are taken rarest first while
    their postings fit ``POSTINGS_BUDGET`` (the rarest one is always taken).
    """
    words = [w for w in dict.fromkeys(candidates) if store.df.get(w, 0) > 0]
    words.sort(key=lambda w: store.df[w])
    chosen: list[str] = []
    total = 0
    for w in words:
        df = store.df[w]
        if chosen and (total + df > POSTINGS_BUDGET or len(chosen) >= MAX_TERMS):
            break
        chosen.append(w)
        total += df
    return chosen


def common_words(store: LessonStore, candidates: list[str], chosen: list[str]) -> list[str]:
    """The query terms ``choose_words`` left out for the budget (the topical, frequent ones).

    They still count: each contributes its ``TOP_PER_TERM`` best postings (see
    ``top_postings``), so a lesson that is about the query's topic is found even
    when the rare terms of the query (identifiers, hosts) point elsewhere.
    """
    if not TOP_PER_TERM:
        return []
    taken = set(chosen)
    present = [w for w in dict.fromkeys(candidates) if store.df.get(w, 0) > 0 and w not in taken]
    present.sort(key=lambda w: store.df[w])
    return present[: max(0, MAX_TERMS - len(chosen))]


def top_postings(conn: Conn, store: LessonStore, word: str) -> dict[int, float]:
    """The ``TOP_PER_TERM`` lessons where ``word`` weighs most, with its BM25 score there.

    Within one term BM25 orders lessons by term frequency and length alone (the
    term's idf is the same factor for all of them), and lesson text is never
    rewritten, so the list is computed once per term (one pass over its postings)
    and kept in memory; lessons added since are scored on the next use through
    FTS5's rowid range, which reads only the new postings.
    """
    n_docs = store.n_docs
    entry = store.top_postings.get(word)
    if entry is not None and entry[0] == n_docs:
        return entry[2]
    since = entry[1] if entry is not None else 0
    top_seq = int(conn.execute("SELECT coalesce(max(seq), 0) FROM lessons").fetchone()[0])
    rows = conn.execute(
        f"SELECT rowid, {_BM25} AS r FROM lessons_fts"
        " WHERE lessons_fts MATCH ? AND rowid > ? ORDER BY r LIMIT ?",
        (terms.fts_query([word]), since, TOP_PER_TERM),
    ).fetchall()
    best = dict(entry[2]) if entry is not None else {}
    best.update((int(r[0]), -float(r[1])) for r in rows)
    if len(best) > TOP_PER_TERM:
        best = dict(sorted(best.items(), key=lambda x: x[1], reverse=True)[:TOP_PER_TERM])
    cache = store.top_postings
    cache.pop(word, None)
    while len(cache) >= TOP_TERMS_CACHED:
        cache.pop(next(iter(cache)), None)
    cache[word] = (n_docs, top_seq, best)
    return best


async def warm_top_postings(store: LessonStore, min_df: int = POSTINGS_BUDGET // 2) -> int:
    """Fill ``top_postings`` for every term in more than ``min_df`` lessons, most frequent first.

    A daemon runs this in the background at start, so the first recalls do not
    each pay a pass over a frequent term's postings (about 70 ms for a term in
    all of 100k lessons; about 2 s for all such terms at 100k). One read per
    term, so recalls interleave. SQLite's FTS5 only.

    The terms among them that still fit the budget (a query may take them as
    its rare terms) also get their whole scored list (``scored``): a pass over
    up to ``POSTINGS_BUDGET`` postings that a recall would otherwise pay.
    """
    if store.db.engine != "sqlite" or not TOP_PER_TERM:
        return 0
    frequent = sorted((w for w, n in store.df.items() if n > min_df), key=lambda w: -store.df[w])
    for word in frequent[:TOP_TERMS_CACHED]:
        await store.db.read(partial(top_postings, store=store, word=word))
        if store.df.get(word, 0) <= POSTINGS_BUDGET:
            whole = partial(store.scored.get, table="lessons_fts", word=word, version=store.n_docs)
            await store.db.read(whole)
    return min(len(frequent), TOP_TERMS_CACHED)


def _statuses(include_history: bool) -> list[str]:
    live = [Status.CANDIDATE.value, Status.ACTIVE.value, Status.STALE.value]
    if include_history:
        live += [Status.SUPERSEDED.value, Status.RETRACTED.value]
    return live


_SUBJECT_SPLIT = re.compile(r"[/@=]")


@lru_cache(maxsize=1 << 14)
def _subject_base(value: str) -> str:
    """The stemmed name part of a lower-cased subject value ("cuda/12.1" -> "cuda"; "" if short)."""
    base = _SUBJECT_SPLIT.split(value, maxsplit=1)[0]
    return terms.stem(base) if len(base) >= 3 else ""


def _subject_hits(les: Lesson, text_low: str, qset: set[str], want: dict[str, str]) -> list[str]:
    out = []
    for key, value in les.subject.items():
        v = value.lower()
        if not v:
            continue
        if want.get(key, "").lower() == v:
            out.append(f"subject:{key}")
            continue
        if key == "error":
            continue  # error subjects are matched through the signature
        base = _subject_base(v)
        if (len(v) >= 3 and v in text_low) or (base and base in qset):
            out.append(f"subject:{key}")
    return out


async def search(
    store: LessonStore,
    viewer: Viewer,
    text: str,
    *,
    limit: int = 5,
    kinds: Sequence[Kind] = (),
    subject: dict[str, str] | None = None,
    include_history: bool = False,
    expander: vocab.Expander | None = None,
    vectors: VectorIndex | None = None,
) -> list[Hit]:
    """Rank the lessons ``viewer`` may see against ``text``.

    With ``vectors`` the lexical candidates are re-ranked by their similarity
    to the query in the bundled embedding model, fused by reciprocal rank.
    """
    want = dict(subject or {})
    own = terms.query_terms(text)
    asked = terms.query_terms(text + " " + " ".join(want.values())) if want else own
    words = choose_words(store, asked)
    common = common_words(store, asked, words)
    added = (expander or vocab.DEFAULT).expand(text)
    expanded = choose_words(store, [*added, *words]) if added else []
    expanded_common = common_words(store, [*added, *asked], expanded) if added else []
    # the trusted tier is small: every query term (and expansion) fits its budget
    tier_words = [w for w in dict.fromkeys([*own, *added]) if store.df.get(w, 0) > 0][:TIER_TERMS]
    # when the budget dropped none of the query's terms, the main ranking already saw
    # them all and the tier would only repeat it (as a hidden trust boost)
    starved = len(words) < len([w for w in asked if store.df.get(w, 0)])
    sig_lines = signature.signature_lines(text)
    if not sig_lines and text.strip() and "\n" not in text.strip():
        sig_lines = [signature.normalize(text)]
    sig_lines += [s for s in signature.multiline_signatures(text) if s not in sig_lines]
    sig_lines += [
        short
        for short in dict.fromkeys(signature.without_tail(s) for s in sig_lines)
        if short and short not in sig_lines
    ]
    sig_hashes = [h for h in (signature.signature_hash(s) for s in sig_lines) if h]
    vis_sql, vis_args = visibility(viewer)
    statuses = _statuses(include_history)
    sqlite = store.db.engine == "sqlite"  # else no FTS5: the same ranking, see retrieval_pg
    # unary + keeps SQLite from scanning by status instead of the selective index
    status = "+l.status" if sqlite else "l.status"
    cond = f"{vis_sql} AND {status} IN ({','.join('?' * len(statuses))})"
    args: list[Any] = [*vis_args, *statuses]
    if kinds:
        cond += f" AND l.kind IN ({','.join('?' * len(kinds))})"
        args += [k.value for k in kinds]

    qvec = None
    if vectors is not None:
        await vectors.sync(store, SYNC_INLINE)
        qvec = vectors.embedder.embed_one(dense_text(text, expander or vocab.DEFAULT))
    dense: Dense | None = None
    if vectors is not None and qvec is not None:
        index, query_vec = vectors, qvec

        def dense(seqs: list[int]) -> dict[int, float]:
            return index.similarities_by_seq(query_vec, seqs)

    prefetch = PREFETCH_DENSE if dense else PREFETCH
    # seq -> lesson, shared by the lists of this recall and, on SQLite (a store one process
    # owns, whose writes it sees), by later recalls until the next write
    seen: dict[int, Lesson] = store.decoded() if sqlite else {}

    def lexical(
        conn: Conn, ws: list[str], common_ws: Sequence[str] = (), table: str = "lessons_fts"
    ) -> list[tuple[Lesson, float]]:
        if not sqlite:
            from tenantry.memory import retrieval_pg

            return retrieval_pg.bm25(conn, ws, cond, args, table, dense)
        if not ws:
            return []
        common_postings = [top_postings(conn, store, w) for w in common_ws]
        if table == "lessons_fts" and len(ws) == 1 and store.df.get(ws[0], 0) > POSTINGS_BUDGET:
            # a query of frequent terms only: its rarest term's best postings hold its best hits
            rare = [postings.as_arrays(top_postings(conn, store, ws[0]))]
        else:
            v = scored.version(store, table)
            rare = [store.scored.get(conn, table, w, v) for w in ws]
        return _bm25(
            conn,
            terms.fts_query(ws),
            cond,
            args,
            table,
            dense,
            prefetch,
            common_postings,
            seen,
            rare,
        )

    def run(conn: Conn) -> tuple[list[tuple[Lesson, float]], list[Lesson]]:
        ranked = lexical(conn, words, common)
        more = lexical(conn, expanded, expanded_common) if expanded and expanded != words else []
        tier = lexical(conn, tier_words, table="trusted_fts") if tier_words and starved else []
        if tier:  # the tier's lessons compete in each list on that list's scale (see below)
            # (on PostgreSQL a list is the BM25 of its rare terms alone, see retrieval_pg)
            scored = [*words, *common] if sqlite else words
            ranked = _with_candidates(conn, store, ranked, tier, scored)
            if more:
                scored = [*expanded, *expanded_common] if sqlite else expanded
                more = _with_candidates(conn, store, more, tier, scored)
        if more:
            ranked = fuse(ranked, more, W_EXPANDED)
        if tier:
            ranked = fuse(ranked, tier, W_TIER)
        direct: list[int] = []
        for sig in sig_hashes:  # one query per hash: the index yields them best first
            direct += [
                int(r[0])
                for r in conn.execute(
                    f"SELECT l.seq FROM lessons l WHERE l.sig_hash = ? AND {cond}"
                    " ORDER BY l.trust_rank DESC, l.seq DESC LIMIT ?",
                    (sig, *args, SIG_POOL),
                )
            ]
        for key, value in want.items():
            direct += [
                int(r[0])
                for r in conn.execute(
                    f"SELECT l.seq FROM lesson_subjects s JOIN lessons l ON l.id = s.lesson_id"
                    f" WHERE s.key = ? AND s.value = ? AND {cond} LIMIT ?",
                    (key, value.lower(), *args, POOL),
                )
            ]
        _decode(conn, seen, direct)
        return ranked, [seen[seq] for seq in direct if seq in seen]

    ranked, extra = await store.db.read(run)
    hits = rank(ranked, extra, text, want, sig_lines, set(sig_hashes), {*words, *own}, None)
    if vectors is not None and qvec is not None and len(hits) > 1:
        hits = rerank_dense(hits, vectors.similarities(qvec, [h.lesson.id for h in hits]))
    return [Hit(_detached(h.lesson), h.score, h.matched) for h in hits[:limit]]


def _order(h: Hit) -> tuple[bool, bool]:
    return h.lesson.status.live, _trusted(h.lesson)


def rerank_dense(hits: list[Hit], sims: dict[str, float]) -> list[Hit]:
    """Fuse the lexical order with the dense one by reciprocal rank (RRF).

    Each candidate scores ``1/(k + lexical rank) + w/(k + dense rank)``; one
    without a vector keeps only its lexical part. Ranks, not scores, are
    fused: cosines of a static model sit in a narrow band, so scaled and
    summed they barely move the order (see bench/memory.md). Live before
    history and trusted before stale or untrusted still come first, and an
    exact match of a pasted error line is not demoted by the dense order;
    among the exact matches the more trusted comes first (thousands of agent
    observations may share one Slurm error line with a staff-approved answer).
    """
    by_sim = sorted((h for h in hits if h.lesson.id in sims), key=lambda h: -sims[h.lesson.id])
    dense_rank = {h.lesson.id: r for r, h in enumerate(by_sim, 1)}
    fused: dict[str, float] = {}
    for r, h in enumerate(hits, 1):
        d = dense_rank.get(h.lesson.id)
        fused[h.lesson.id] = 1.0 / (RRF_K + r) + (W_DENSE / (RRF_K + d) if d else 0.0)
        if d and d <= 3:
            h.matched.append("dense")

    def key(h: Hit) -> tuple[bool, bool, bool, int, float]:
        exact = "signature" in h.matched
        return (*_order(h), exact, h.lesson.trust.rank if exact else 0, fused[h.lesson.id])

    return sorted(hits, key=key, reverse=True)


def _bm25(
    conn: Conn,
    match: str,
    cond: str,
    args: list[Any],
    table: str = "lessons_fts",
    dense: Dense | None = None,
    prefetch: int = PREFETCH,
    common: Sequence[dict[int, float]] = (),
    decoded: dict[int, Lesson] | None = None,
    rare: Sequence[scored.Arrays] | None = None,
) -> list[tuple[Lesson, float]]:
    """BM25 candidates: rank in FTS5 alone, then filter; join in SQL only if too few pass.

    ``match`` holds the query's rare terms; ``common`` the best postings of each
    frequent one (``top_postings``). A lesson's score is its BM25 over the rare
    terms plus its score in every frequent term's list it is in, so the
    candidates are the best over all the query's terms, not only the rare ones.

    With ``dense`` the ``POOL`` kept of the visible prefetched hits are the best by
    BM25 rank and dense rank fused (RRF), not by BM25 alone: among many lessons
    sharing the query's words, the ones that mean the same survive the cut.

    ``decoded`` (store seq -> lesson) is shared by the lists of one query, so a
    lesson several of them find is read and decoded once.
    """
    bm25 = _BM25.replace("lessons_fts", table)
    if rare is None:
        top = conn.execute(
            f"SELECT rowid, {bm25} AS r FROM {table} WHERE {table} MATCH ? ORDER BY r LIMIT ?",
            (match, prefetch),
        ).fetchall()
        scores = {int(r[0]): -float(r[1]) for r in top}
    else:  # the same sum from the terms' scored lists (``scored``)
        scores = postings.merge_lists(rare, prefetch)
        top = list(scores)
    if common:
        scores = postings.merge(scores, common, prefetch)
    if scores:
        marks = ",".join("?" * len(scores))
        visible = [
            int(r[0])
            for r in conn.execute(
                f"SELECT l.seq FROM lessons l WHERE l.seq IN ({marks}) AND {cond}",
                (*scores, *args),
            )
        ]
        if len(visible) >= POOL or len(top) < prefetch or common:
            best = sorted(visible, key=scores.__getitem__, reverse=True)
            if dense is not None and len(best) > POOL:
                best = _fused_cut(best, dense(best))
            best = best[:POOL]
            if not best:
                return []
            memo = decoded if decoded is not None else {}
            _decode(conn, memo, best)
            found = [(memo[seq], scores[seq]) for seq in best if seq in memo]
            found.sort(key=lambda x: x[1], reverse=True)
            return found
    joined = conn.execute(
        f"SELECT {_L_COLUMNS}, {bm25} AS r FROM {table}"
        f" JOIN lessons l ON l.seq = {table}.rowid"
        f" WHERE {table} MATCH ? AND {cond} ORDER BY r LIMIT ?",
        (match, *args, POOL),
    )
    return [(row_to_lesson(r), -float(r["r"])) for r in joined]


def _decode(conn: Conn, memo: dict[int, Lesson], seqs: Sequence[int]) -> None:
    """Read and decode the lessons of ``seqs`` that ``memo`` (store seq -> lesson) lacks."""
    need = list(dict.fromkeys(seq for seq in seqs if seq not in memo))
    if need:
        rows = conn.execute(
            f"SELECT l.seq, {_L_COLUMNS} FROM lessons l"
            f" WHERE l.seq IN ({','.join('?' * len(need))})",
            need,
        ).fetchall()
        memo.update((int(r["seq"]), row_to_lesson(r)) for r in rows)


def _detached(les: Lesson) -> Lesson:
    """A copy of a lesson the recalls' memo holds (``LessonStore.decoded``), for the caller."""
    return replace(
        les,
        subject=dict(les.subject),
        evidence=list(les.evidence),
        sources=list(les.sources),
        claim=copy.deepcopy(les.claim),
        findings=[dict(f) for f in les.findings],
        classes=list(les.classes),
    )


def _with_candidates(
    conn: Conn,
    store: LessonStore,
    ranked: list[tuple[Lesson, float]],
    found: list[tuple[Lesson, float]],
    words: list[str],
) -> list[tuple[Lesson, float]]:
    """``ranked`` (BM25 of ``words`` in the whole index) joined by the lessons of ``found`` it
    lacks, each scored on the same scale: its BM25 for ``words`` with the whole index's
    statistics, computed from its indexed text (kept in memory: it is never rewritten)."""
    have = {les.id for les, _ in ranked}
    new = {les.id: les for les, _ in found if les.id not in have}
    if not new or not words:
        return ranked
    cache = store.doc_terms
    need = [i for i in new if i not in cache]
    if need:
        rows = conn.execute(
            "SELECT l.id, f.title, f.body, f.subjects, f.signature FROM lessons l"
            " JOIN lessons_fts f ON f.rowid = l.seq"
            f" WHERE l.id IN ({','.join('?' * len(need))})",
            need,
        ).fetchall()
        if len(cache) + len(rows) > DOCS_CACHED:
            cache.clear()
        for r in rows:
            cache[str(r[0])] = bm25.doc((str(r[1]), str(r[2]), str(r[3]), str(r[4])))
    n = store.n_docs or 1
    idfs = {w: bm25.idf(n, store.df.get(w, 0)) for w in dict.fromkeys(words)}
    avgdl = store.n_tokens / n
    out = list(ranked)
    for i, les in new.items():
        d = cache.get(i)
        x = bm25.score(d, idfs, avgdl) if d is not None else None
        if x is not None:
            out.append((les, x))
    out.sort(key=lambda x: x[1], reverse=True)
    return out


def _fused_cut(by_bm25: list[int], sims: dict[int, float]) -> list[int]:
    """``by_bm25`` (best first) re-ordered by BM25 rank and dense rank fused (RRF)."""
    by_sim = sorted(sims, key=sims.__getitem__, reverse=True)
    d_rank = {seq: r for r, seq in enumerate(by_sim, 1)}
    fused = {
        seq: 1.0 / (RRF_K + r) + (W_DENSE / (RRF_K + d_rank[seq]) if seq in d_rank else 0.0)
        for r, seq in enumerate(by_bm25, 1)
    }
    return sorted(by_bm25, key=fused.__getitem__, reverse=True)


def _trusted(les: Lesson) -> bool:
    """Stale and untrusted lessons rank below every trusted, current one."""
    return les.status is not Status.STALE and les.trust.rank >= 1


def rank(
    ranked: list[tuple[Lesson, float]],
    extra: Iterable[Lesson],
    text: str,
    want: dict[str, str],
    sig_lines: list[str],
    sig_hashes: set[str],
    qset: set[str],
    limit: int | None,
) -> list[Hit]:
    """Combine BM25 candidates and direct matches into the final order.

    ``qset`` holds the query's own terms (``terms.query_terms(text)``) and those asked of the index.
    """
    best = max((s for _, s in ranked), default=0.0) or 1.0
    pool: dict[str, tuple[Lesson, float]] = {les.id: (les, s / best) for les, s in ranked}
    for les in extra:
        pool.setdefault(les.id, (les, 0.0))
    text_low = text.lower()
    sig_sets = [set(s.split()) for s in sig_lines]
    # a signature sharing under half its words with all of them is under 0.5 with each one
    sig_words = set().union(*sig_sets)
    hits: list[Hit] = []
    for les, base in pool.values():
        score = base
        matched = ["text"] if base > 0 else []
        if les.sig_hash and les.sig_hash in sig_hashes:
            score += W_SIG_EXACT + W_SIG_TRUST * les.trust.rank
            matched.append("signature")
        elif (
            les.error_signature
            and sig_lines
            and 2 * len(signature.words(les.error_signature) & sig_words)
            >= len(signature.words(les.error_signature))
        ):
            near = signature.best_similarity(les.error_signature, sig_sets)
            if near >= 0.5:
                score += W_SIG_NEAR * near
                matched.append("signature~")
        subj = _subject_hits(les, text_low, qset, want)
        score += W_SUBJECT * min(len(subj), 2)
        matched += subj
        score += W_TRUST * les.trust.rank
        if les.status is Status.STALE:
            score -= P_STALE
        elif les.status is Status.CANDIDATE:
            score -= P_CANDIDATE
        hits.append(Hit(les, score, matched))
    hits.sort(key=lambda h: (*_order(h), h.score), reverse=True)
    return hits if limit is None else hits[:limit]
