"""A search's rounds under Hypothesis: its settings, seed and example database, and what
its run raised (findings, a bad spec) turned into the minimal failing example per kind."""

from __future__ import annotations

import time
from typing import Any

import hypothesis
from hypothesis import strategies as st

from pallas_verify.errors import InvalidSpec
from pallas_verify.findings import Finding
from pallas_verify.profiles import profile_settings
from pallas_verify.search import BadSpec, Found, Search, Stopped

__all__ = ["merge", "run_search"]


def run_search(
    search: Search, *, cap: int | None, profile: str, max_examples: int | None, seed: int | None, database: Any
) -> list[tuple[Finding, dict[str, Any]]]:
    """One round of ``search``: up to ``cap`` examples (None: its whole budget)."""
    started = time.perf_counter()
    try:
        return _run_round(search, cap=cap, profile=profile, max_examples=max_examples, seed=seed, database=database)
    finally:
        search.seconds += time.perf_counter() - started


def _run_round(
    search: Search, *, cap: int | None, profile: str, max_examples: int | None, seed: int | None, database: Any
) -> list[tuple[Finding, dict[str, Any]]]:
    overrides: dict[str, Any] = {"database": database} if database is not None else {}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    if seed is not None:
        overrides["derandomize"] = False
        if database is None:  # a seeded search replays nothing saved, unless it is given a database (a slice)
            overrides["database"] = None

    settings = hypothesis.settings(profile_settings(profile), **overrides)
    search.max_examples = settings.max_examples
    if cap is not None and cap < settings.max_examples:
        settings = hypothesis.settings(settings, max_examples=cap)

    # The source of ``run`` (comments and decorators aside) is part of Hypothesis's key of
    # every saved example and of a derandomized search's seed: keep it as it is.
    @hypothesis.given(st.data())
    def run(data: st.DataObject) -> None:
        try:
            search.example(data)
        finally:
            _tick(search)

    where = search.backend.name + (f"+{search.transform}" if search.transform else "")
    # The example database's key is the digest of the inner test function (the same source
    # for every search): this makes it one key per spec and backend, so a search never
    # replays, nor deletes as no longer failing, another kernel's saved failure. Hypothesis
    # has no public way to key a test's examples; its own stateful tests set this attribute.
    run.hypothesis.inner_test._hypothesis_internal_add_digest = f"{search.spec.name}|{where}".encode()  # type: ignore[attr-defined]
    if seed is not None:
        run = hypothesis.seed(seed)(run)
    run = settings(run)  # after @seed, which would turn the database off
    try:
        run()
    except Stopped:
        return merge(list(search.last_found.values()))
    except BadSpec as exc:
        prefix = f"KernelSpec {search.spec.name!r}: "
        raise InvalidSpec(str(exc) if str(exc).startswith(prefix) else prefix + str(exc)) from None
    except Found as exc:
        return merge([exc])
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        others = [e for e in leaves if not isinstance(e, Found)]
        if others:
            raise others[0] from group
        return merge([e for e in leaves if isinstance(e, Found)])
    return []


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def merge(found: list[Found]) -> list[tuple[Finding, dict[str, Any]]]:
    """One finding per kind, each with the minimal example that showed it."""
    seen: dict[str, tuple[Finding, dict[str, Any]]] = {}
    for exc in found:
        for f in exc.findings:
            seen.setdefault(f.kind, (f, exc.example))
    return list(seen.values())


def _tick(search: Search) -> None:
    """Tell the search's progress (if any) that an example or shrink step ran."""
    if search.progress is not None:
        where = search.backend.name + (f"+{search.transform}" if search.transform else "")
        failing = sorted({f.kind for found in search.seen.values() for f in found.findings})
        search.progress.tick(where, examples=search.examples, max_examples=search.max_examples,
                             shrink_steps=search.shrink_steps, failing=failing)
