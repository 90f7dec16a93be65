"""Helpers for test authors: verify a spec built inside a test, fail with its findings.

The pytest plugin collects module-level KernelSpecs by itself; a spec built inside a
test function goes through :func:`kernel_test`. Cheap to import: neither pytest, jax nor
the engine is imported until a spec is verified.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pallas_verify.reports.report import Report
    from pallas_verify.spec import KernelSpec

__all__ = ["DEFAULT_BACKENDS", "DEFAULT_COMPILE_TARGETS", "DEFAULT_INTERPRETERS", "KernelFindingsError", "PluginOptions",
           "default_backends", "kernel_test", "prestart", "verify_with"]

#: The interpreters: every default run has them.
DEFAULT_INTERPRETERS: tuple[str, ...] = ("interpret", "tpu_interpret", "gpu_interpret")
#: One compile-only target per compiler extra, run by default where that extra is installed
#: (libtpu: Mosaic TPU for v5e; the CUDA plugin: Triton for H100), so a kernel the
#: compiler rejects fails a default run, not only one that names compile backends.
DEFAULT_COMPILE_TARGETS: tuple[str, ...] = ("mosaic_tpu:v5e", "triton:h100")


def default_backends() -> tuple[str, ...]:
    """The interpreters, then each DEFAULT_COMPILE_TARGETS whose compiler is installed here
    (looked up by file: nothing is imported)."""
    from pallas_verify.backends.families import missing_compiler

    return DEFAULT_INTERPRETERS + tuple(t for t in DEFAULT_COMPILE_TARGETS
                                        if missing_compiler(t.partition(":")[0]) is None)


#: The backends the plugin and ``kernel_test`` run unless told otherwise (default_backends()).
DEFAULT_BACKENDS: tuple[str, ...] = default_backends()


@dataclasses.dataclass(frozen=True, kw_only=True)
class PluginOptions:
    """The session's pallas-verify options (``--pv-*``); the defaults outside a session.

    Attributes:
      backends: backend names each spec is tested on; default DEFAULT_BACKENDS.
      max_examples: examples per backend; None (default) keeps the profile's.
      profile: Hypothesis settings profile (dev, ci, nightly); default "dev".
      seed: the session's seed (``choices.run_seed``: 0 under a deterministic profile, ci); None
        outside a session.
      report_dir: where the session's report is written; None (default): no report.
      out_dir: where reproducers are written; default ``pv-out`` under the rootdir.
      timeout_s: per-case time limit in seconds; default 120.
      isolate: the engine's isolation ("auto", "always", "never"); default "auto".
      shrink_budget_s: seconds spent shrinking a failure per backend; default 60.
    """

    backends: tuple[str, ...] = DEFAULT_BACKENDS
    max_examples: int | None = None
    profile: str = "dev"
    seed: int | None = None
    report_dir: Path | None = None
    out_dir: Path = Path("pv-out")
    timeout_s: float = 120.0
    isolate: str = "auto"
    shrink_budget_s: float = 60.0


# The running pytest sessions (pytester nests them), innermost last: their options, and
# where a session records the reports of kernel_test. The plugin pushes and pops them.
active_options: list[PluginOptions] = []
recorders: list[Callable[[Report], None]] = []


class KernelFindingsError(AssertionError):
    """A kernel showed findings; the message is every finding with its evidence and reproducer."""

    def __init__(self, report: Report) -> None:
        from pallas_verify.reports.text import findings_text

        self.report = report
        n = len(report.findings)
        super().__init__(f"{n} finding{'s' if n != 1 else ''}:\n\n" + findings_text(report.findings))


def prestart(options: PluginOptions) -> None:
    """Start the worker processes the session's kernels will run in (unless ``options``
    keeps cases in this process), so that their start overlaps pytest's own work."""
    if options.isolate == "never":
        return
    from pallas_verify.execution.isolation import shared_worker, static_tracer_slot

    shared_worker("interpreters").prestart()
    shared_worker(static_tracer_slot()).prestart()


def verify_with(spec: KernelSpec, backends: Sequence[str], options: PluginOptions) -> Report:
    """The engine's search of ``spec`` on ``backends`` under the session's ``options``, with
    the persistent compilation cache on where the environment leaves it on."""
    from pallas_verify._jax_compat import compile_cache
    from pallas_verify.engine import verify

    compile_cache.enable(trim=True)

    return verify(spec, list(backends), options.max_examples, options.seed, profile=options.profile,
                  out_dir=options.out_dir, timeout_s=options.timeout_s, isolate=options.isolate,
                  shrink_budget_s=options.shrink_budget_s)


def kernel_test(
    spec: KernelSpec,
    *,
    backends: Sequence[str] | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    profile: str | None = None,
) -> Report:
    """Verify a spec built inside a test; raise KernelFindingsError if anything was found.

    Options left None take the session's (``--pv-*``), or the plugin's defaults outside
    a pytest session. Backends not available here or not for the kernel's platforms are
    skipped, as in collected items. Returns the Report when nothing was found.
    """
    __tracebackhide__ = True
    base = active_options[-1] if active_options else PluginOptions()
    options = dataclasses.replace(
        base,
        backends=tuple(backends) if backends is not None else base.backends,
        max_examples=max_examples if max_examples is not None else base.max_examples,
        seed=seed if seed is not None else base.seed,
        profile=profile if profile is not None else base.profile,
    )
    report = verify_with(spec, options.backends, options)
    if recorders:
        recorders[-1](report)
    if report.findings:
        raise KernelFindingsError(report)
    return report
