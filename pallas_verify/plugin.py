"""The pytest plugin: every module-level KernelSpec of a test module is a test per backend.

A spec ``matmul`` collected with the default backends gives the items
``matmul[interpret]``, ``matmul[tpu_interpret]`` and ``matmul[gpu_interpret]``; ``-k``,
``-n auto`` and reruns work on them like on any test. Specs built inside a test go
through :func:`pallas_verify.testing.kernel_test`.

Cheap to import, as pytest loads it in every run: nothing here imports jax, hypothesis
or the engine at module level. Options keep their defaults without loading anything; an
option given is checked against the table that owns its choices; the engine is imported
once a KernelSpec has been collected.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pallas_verify import testing
from pallas_verify._assert_rewrite import not_rewritten
from pallas_verify.choices import ISOLATE, PROFILES, derandomized, describe, repeats, run_seed
from pallas_verify.testing import DEFAULT_BACKENDS, KernelFindingsError, PluginOptions, verify_with

# kernel_test lives in pallas_verify.testing; `from pallas_verify.plugin import kernel_test`
# keeps working.
kernel_test = testing.kernel_test

if TYPE_CHECKING:
    from pallas_verify import passes
    from pallas_verify.reports.report import Report
    from pallas_verify.spec import KernelSpec

__all__ = ["KernelItem"]

_OPTIONS = pytest.StashKey["PluginOptions"]()
_REPORT = pytest.StashKey["Report"]()
_SEEN = pytest.StashKey[set]()
_STARTED = pytest.StashKey[float]()
_WRITTEN = pytest.StashKey[dict]()
_RECORDER = pytest.StashKey[object]()
_PARTS = ".parts"
_KEPT_PROPERTY = "pallas_verify_kept_pass"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pallas-verify", "pallas-verify: KernelSpecs as tests")
    group.addoption("--pv-backends", default=None, metavar="A,B",
                    help=f"backends to test each KernelSpec on (default: {','.join(DEFAULT_BACKENDS)})")
    group.addoption("--pv-max-examples", type=int, default=None, metavar="N",
                    help="examples per kernel and backend (default: the profile's)")
    group.addoption("--pv-profile", default="dev", metavar="NAME",
                    help="Hypothesis settings profile: " + describe(PROFILES))
    group.addoption("--pv-seed", type=int, default=None, metavar="S",
                    help="seed of the search (default: a fresh one, printed in the header)")
    group.addoption("--pv-report", default=None, metavar="DIR",
                    help="write the session's report (JSON, HTML, JUnit XML, Markdown) to DIR")
    group.addoption("--pv-timeout", type=float, default=120.0, metavar="SECONDS", help="per-case time limit")
    group.addoption("--pv-shrink-budget", type=float, default=60.0, metavar="SECONDS",
                    help="time spent shrinking a failure to its minimal config, per backend (default 60)")
    group.addoption("--pv-isolate", default="auto", metavar="|".join(ISOLATE),
                    help="where cases run: " + describe(ISOLATE))
    group.addoption("--pv-no-pass-cache", action="store_true", default=False,
                    help="search even when the same seeded run of the same files passed before (by default "
                         "such a pass is kept in the user's cache folder and its verdict reused; "
                         "PALLAS_VERIFY_PASS_CACHE=off does the same)")
    group.addoption("--pv-no-compile-cache", action="store_true", default=False,
                    help="compile everything anew and keep nothing (by default the interpreters' and the "
                         "references' compiles are kept in the user's cache folder, ~/.cache/pallas-verify, "
                         "and read back by later runs; PALLAS_VERIFY_COMPILE_CACHE=off does the same)")


def _options(config: pytest.Config) -> PluginOptions:
    get = config.getoption
    if get("--pv-max-examples") is not None:  # checked (errors loaded) only when given
        _check(lambda: _errors().check_positive_int("--pv-max-examples", get("--pv-max-examples")))
    backends = DEFAULT_BACKENDS
    if get("--pv-backends") is not None:
        backends = tuple(b.strip() for b in get("--pv-backends").split(",") if b.strip())
        _check(lambda: [_registry().get(b) for b in backends] or _no_backends())
    profile = get("--pv-profile")
    # The defaults are valid choices; a value given is checked against its table (which
    # loads hypothesis or the runner, so a run that leaves them alone does not).
    if profile != PluginOptions.profile:
        _check(lambda: _profiles().profile_settings(profile))
    if get("--pv-isolate") != PluginOptions.isolate:
        _check(lambda: _isolate_choice(get("--pv-isolate")))
    report = Path(get("--pv-report")).resolve() if get("--pv-report") else None
    out = report / "reproducers" if report else config.rootpath / "pv-out"
    return PluginOptions(backends=backends, max_examples=get("--pv-max-examples"), profile=profile,
                         seed=_seed(config, profile), report_dir=report, out_dir=out,
                         timeout_s=get("--pv-timeout"), isolate=get("--pv-isolate"),
                         shrink_budget_s=get("--pv-shrink-budget"))


def _check(validate: Any) -> None:
    from pallas_verify.errors import PallasVerifyError

    try:
        validate()
    except PallasVerifyError as exc:
        raise pytest.UsageError(f"pallas-verify: {exc}") from None


def _no_backends() -> None:
    from pallas_verify.errors import InvalidArgument

    raise InvalidArgument("--pv-backends names no backend; give a comma-separated list, e.g. interpret,tpu_interpret.")


def _isolate_choice(value: str) -> None:
    from pallas_verify.errors import InvalidArgument

    if value not in ISOLATE:
        raise InvalidArgument(f"--pv-isolate={value!r} is not one of {tuple(ISOLATE)}.")


def _errors() -> Any:
    from pallas_verify import errors

    return errors


def _registry() -> Any:
    from pallas_verify.backends import registry

    return registry


def _profiles() -> Any:
    from pallas_verify import profiles

    return profiles


def _seed(config: pytest.Config, profile: str) -> int:
    """The controller's seed on an xdist worker; else the run's (``choices.run_seed``)."""
    workerinput = getattr(config, "workerinput", None)
    if config.getoption("--pv-seed") is None and workerinput is not None and "pv_seed" in workerinput:
        return workerinput["pv_seed"]
    return run_seed(config.getoption("--pv-seed"), profile)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    from pallas_verify._env import configure, disable_compile_cache

    configure()  # before any hook imports jax
    not_rewritten(config.pluginmanager)  # pallas-verify's own modules: plain from here on
    if config.getoption("--pv-no-compile-cache"):
        disable_compile_cache()  # here and in every worker the session starts
    if config.getoption("--pv-no-pass-cache"):
        from pallas_verify import passes

        passes.disable()  # here and in every worker the session starts
    options = _options(config)
    config.stash[_OPTIONS] = options
    config.addinivalue_line("markers", "pallas_verify: a KernelSpec test collected by pallas-verify")
    testing.active_options.append(options)
    if options.report_dir is not None and not _is_worker(config):
        parts = options.report_dir / _PARTS
        for stale in parts.glob("*.json") if parts.is_dir() else []:
            stale.unlink()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _OPTIONS in config.stash and config.stash[_OPTIONS] in testing.active_options:
        testing.active_options.remove(config.stash[_OPTIONS])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every worker searches with the controller's seed."""
    node.workerinput["pv_seed"] = node.config.stash[_OPTIONS].seed


def pytest_report_header(config: pytest.Config) -> str:
    o = config.stash[_OPTIONS]
    how = "deterministic profile: " if derandomized(o.profile) else ""
    seed = f"{o.seed} ({how}repeat with --pv-seed {o.seed})"
    examples = o.max_examples if o.max_examples is not None else "profile default"
    return (f"pallas-verify: seed={seed}, profile={o.profile}, backends={','.join(o.backends)}, "
            f"max_examples={examples}")


# -- collection ---------------------------------------------------------------------------


def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> list[KernelItem] | None:
    """A module-level KernelSpec -> one item per backend, named ``<spec.name>[<backend>]``."""
    spec_module = sys.modules.get("pallas_verify.spec")  # no KernelSpec can exist before it is imported
    if spec_module is None or not isinstance(obj, spec_module.KernelSpec) or not isinstance(collector, pytest.Module):
        return None
    seen = collector.stash.setdefault(_SEEN, set())
    if id(obj) in seen:  # the same spec under two names is one set of tests
        return []
    seen.add(id(obj))
    backends = collector.config.stash[_OPTIONS].backends
    line = _assignment_line(collector, name)
    return [KernelItem.from_parent(collector, name=f"{obj.name}[{b}]", spec=obj, backend=b, line=line)
            for b in backends]


def _assignment_line(module: pytest.Module, name: str) -> int:
    """The 0-based line that assigns ``name`` in the module (0 when not found)."""
    try:
        lines = module.path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return 0
    pattern = re.compile(rf"^{re.escape(name)}\s*(?::[^=]*)?=")
    return next((i for i, text in enumerate(lines) if pattern.match(text)), 0)


class KernelItem(pytest.Item):
    """One KernelSpec on one backend: a Hypothesis search by the engine."""

    def __init__(self, *, spec: KernelSpec, backend: str, line: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.backend, self.line = spec, backend, line
        # Its pass's key and its kept pass, looked up once collected (before any search
        # changes the process: the key is that of every run's same point).
        self.key: passes.Key | None = None
        self.kept: passes.Kept | None = None
        self.add_marker("pallas_verify")
        self.skip = _registry().skip_reason(spec, _registry().get(backend))
        if self.skip is not None:
            why = self.skip.reason if self.skip.status == "skipped" else f"{self.skip.status}: {self.skip.reason}"
            self.add_marker(pytest.mark.skip(reason=why))

    def pass_key(self) -> passes.Key | None:
        """The key this item's pass is kept under; None when its search is not seeded the
        same way every run (neither ``--pv-seed`` nor a deterministic profile)."""
        from pallas_verify import passes

        o = self.config.stash[_OPTIONS]
        if not repeats(self.config.getoption("--pv-seed"), o.profile):
            return None
        options = {"backend": self.backend, "max_examples": o.max_examples, "seed": o.seed, "profile": o.profile,
                   "timeout": o.timeout_s, "shrink_budget": o.shrink_budget_s, "isolate": o.isolate}
        return passes.Key.of("plugin", f"{self.path}::{self.spec.name}", options)

    def runtest(self) -> None:
        from pallas_verify import passes

        if self.kept is not None:  # the same seeded search of these very files passed: nothing to search
            report = self.kept.as_report()
            self.user_properties.append((_KEPT_PROPERTY, self.kept.at))  # reaches xdist's controller
        else:
            report = verify_with(self.spec, (self.backend,), self.config.stash[_OPTIONS])
        _record(self.config, report)
        if self.kept is None and passes.keepable(report):
            passes.keep(self.key, report, passes.files_read())
        if report.findings:
            raise KernelFindingsError(report)
        result = next((r for r in report.results if r.backend == self.backend), None)
        if result is not None and result.status == "error":  # the tool's failure, not the kernel's: said so
            raise RuntimeError(result.reason)
        if result is not None and result.status in ("skipped", "unsupported"):
            pytest.skip(f"{result.status}: {result.reason}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, KernelFindingsError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.line, f"{self.name} (KernelSpec)"


# -- the session's report -----------------------------------------------------------------


def pytest_sessionstart(session: pytest.Session) -> None:
    recorder = session.config.stash[_RECORDER] = functools.partial(_record, session.config)
    testing.recorders.append(recorder)  # kernel_test's reports join the session's
    session.config.stash[_STARTED] = time.perf_counter()


def _session_report(config: pytest.Config) -> Report:
    """The session's report, made on first use (a run without KernelSpecs never loads it)."""
    if _REPORT not in config.stash:
        from pallas_verify.reports.report import Report

        o = config.stash[_OPTIONS]
        config.stash[_REPORT] = Report(backends=list(o.backends), seed=o.seed, profile=o.profile)
    return config.stash[_REPORT]


def _record(config: pytest.Config, report: Report) -> None:
    if _STARTED in config.stash:
        _session_report(config).merge(report)


def _record_skip(config: pytest.Config, item: KernelItem) -> None:
    from pallas_verify.reports.report import Report, kernel_entry, unrun_results

    assert item.skip is not None
    part = Report(backends=[item.backend], kernels=[kernel_entry(item.spec)])
    part.results.extend(unrun_results(item.spec, item.backend, item.skip.status, item.skip.reason))
    _record(config, part)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Selected items skipped at collection are cells of the report too; where some will
    run, the worker processes start now, while pytest gets to them."""
    kernels = [item for item in session.items if isinstance(item, KernelItem)]
    for item in kernels:
        if item.skip is not None:
            _record_skip(session.config, item)
        elif not session.config.option.collectonly:
            from pallas_verify import passes

            item.key = item.pass_key()
            item.kept = passes.reuse(item.key)
    if not session.config.option.collectonly and any(item.skip is None and item.kept is None for item in kernels):
        testing.prestart(session.config.stash[_OPTIONS])


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if config.stash.get(_RECORDER, None) in testing.recorders:
        testing.recorders.remove(config.stash[_RECORDER])
    options = config.stash.get(_OPTIONS, None)
    if options is None or options.report_dir is None or _STARTED not in config.stash:
        return
    report = _session_report(config)
    parts = options.report_dir / _PARTS
    if _is_worker(config):
        report.write_json(parts / f"{config.workerinput['workerid']}.json")
        return
    _write_session_report(config, report, parts)


def _write_session_report(config: pytest.Config, report: Report, parts: Path) -> None:
    from pallas_verify.reports.render import write_reports
    from pallas_verify.reports.report import Report

    for part in sorted(parts.glob("*.json")) if parts.is_dir() else []:
        report.merge(Report.from_dict(json.loads(part.read_text())))
        part.unlink()
    if parts.is_dir():
        parts.rmdir()
    report.seconds = time.perf_counter() - config.stash[_STARTED]
    paths = write_reports(report, config.stash[_OPTIONS].report_dir)
    config.stash[_WRITTEN] = paths


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    paths = config.stash.get(_WRITTEN, None)
    if paths:
        terminalreporter.write_line(f"pallas-verify report: {paths['html']} (JSON: {paths['json']})")
    kept = sum(any(name == _KEPT_PROPERTY for name, _ in getattr(test, "user_properties", ()))
               for test in terminalreporter.stats.get("passed", ()))
    if kept and not _is_worker(config):
        terminalreporter.write_line(f"pallas-verify: {kept} passed as kept passes: the same seeded search of these "
                                    "very files passed before, nothing was searched (--pv-no-pass-cache searches)")
    if _REPORT in config.stash and not _is_worker(config):
        from pallas_verify.reports.report import unsanitized

        report = config.stash[_REPORT]
        for kernel in report.kernels:  # a PASS says how it was judged
            for line in unsanitized(kernel, report.results, report.backends):
                terminalreporter.write_line(f"pallas-verify: {kernel['name']} judged without a sanitizer on {line}",
                                            yellow=True)
