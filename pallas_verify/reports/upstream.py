"""Upstream limitations in the report, each with a standalone plain-jax reproducer.

``attribution`` decides that an interpreter's error is JAX's; this writes, once per
kernel and backend, ``OUT/<kernel>-upstream-<backend>.py`` (plus the inputs ``.npz`` and,
when the kernel is a module attribute, that module pruned to plain jax as
``...-kernel.py``). The script needs jax and numpy only: it runs the example as the
backend that judged it clean does, then as the failing one, and prints JAX's traceback.
It exits 1 while JAX fails, 0 once JAX runs the kernel, 3 when the kernel does not run
here at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pallas_verify.reports.casefile import save_case
from pallas_verify.reports.kernel_source import kernel_module
from pallas_verify.reports.reproducer import file_stem

__all__ = ["upstream_entries", "write_upstream_reproducer"]

_TEMPLATE = '''#!/usr/bin/env python
"""JAX fails to run the Pallas kernel {kernel!r} on {backend}; {witnessed}.

  error:     {error}
  raised at: {frame}{site}

Found by pallas-verify (an upstream limitation, JAX {version}). {how}

Run `python {script}`: {runs_witness}it runs the example as
{backend} does (JAX fails) and prints the traceback. Exit status: 1 while JAX fails,
0 once it runs the kernel, 3 when the kernel does not run here at all.
"""
import contextlib
import importlib.util
import os
import pickle
import sys
import traceback
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the interpreters run on the host's CPU

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental.pallas import mosaic_gpu as plgpu  # noqa: E402,F401
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

HERE = Path(__file__).resolve().parent
CONFIG = {config}
TRANSFORM = {transform!r}
# A TPU kernel is traced as for a TPU v5e: Pallas TPU code reads the chip's tiling then.
TPU_KERNEL = {tpu!r}
FAILING = ({backend!r}, lambda: {failing})
WITNESS = ({witness!r}, lambda: {witness_src})


def load_kernel():
    """The kernel as the spec calls it, and the config keys it takes (None: any)."""
{loader}


def load_inputs():
    import ml_dtypes

    with np.load(Path(__file__).with_suffix(".npz")) as data:
        names = [str(n) for n in data["__dtypes__"]]
        arrays = [data[f"arg{{i}}"] for i in range(len(names))]
        config = pickle.loads(data["__config__"].tobytes()) if "__config__" in data.files else CONFIG
    return tuple(x.view(np.dtype(getattr(ml_dtypes, n, None) or n)) for x, n in zip(arrays, names)), config


def vjp(fn, xs):
    """The VJP at a grad example: primals, cotangents, then an array whose length counts the primals."""
    n = xs[-1].shape[0]
    primals, cotangents = xs[:n], iter(xs[n:-1])
    floats = [i for i, x in enumerate(primals) if jax.numpy.issubdtype(x.dtype, jax.numpy.inexact)]

    def of_floats(*values):
        args = list(primals)
        for i, value in zip(floats, values):
            args[i] = value
        return fn(*args)

    out, pullback = jax.vjp(of_floats, *(primals[i] for i in floats))
    leaves, tree = jax.tree.flatten(out)
    cts = [jax.numpy.asarray(next(cotangents)).astype(leaf.dtype)
           if jax.numpy.issubdtype(leaf.dtype, jax.numpy.inexact) else np.zeros(leaf.shape, jax.dtypes.float0)
           for leaf in leaves]
    return pullback(jax.tree.unflatten(tree, cts))


def tpu_context():
    device = jax.sharding.AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="cpu")
    mesh = jax.sharding.AbstractMesh((1,), ("x",), (jax.sharding.AxisType.Auto,), abstract_device=device)
    return jax.sharding.use_abstract_mesh(mesh)


def run(interpret, kernel, inputs, config):
    def fn(*xs):
        return kernel(*xs, **config)

    call = {{None: fn, "vmap": jax.vmap(fn), "grad": lambda *xs: vjp(fn, xs)}}[TRANSFORM]
    with tpu_context() if TPU_KERNEL else contextlib.nullcontext(), pltpu.force_tpu_interpret_mode(interpret):
        args = [jax.device_put(x, jax.devices()[0]) for x in inputs]
        return jax.block_until_ready(jax.jit(call)(*args))


def main():
    try:
        kernel, accepts = load_kernel()
        inputs, config = load_inputs()
        config = {{k: v for k, v in config.items() if accepts is None or k in accepts}}
        if WITNESS[0] is not None:
            run(WITNESS[1](), kernel, inputs, config)
    except Exception:
        traceback.print_exc()
        print(f"cannot run the kernel here: it fails as {{WITNESS[0]}} runs it too")
        return 3
    if WITNESS[0] is not None:
        print(f"{{WITNESS[0]}}: the kernel runs")
    try:
        run(FAILING[1](), kernel, inputs, config)
    except Exception:
        traceback.print_exc()
        print(f"{{FAILING[0]}}: JAX fails to run the kernel (the limitation is still there)")
        return 1
    print(f"{{FAILING[0]}}: the kernel runs now (fixed upstream)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

_FROM_MODULE = '''    sys.path.append({directory!r})  # the kernel module's own imports
    spec = importlib.util.spec_from_file_location("pallas_kernel", HERE / {file!r})
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    kernel = module
    for part in {attribute!r}.split("."):
        kernel = getattr(kernel, part)
    return kernel, {accepts!r}'''

_FROM_SPEC = '''    from pallas_verify.loader import load_spec  # the kernel is no module attribute: loaded through its spec

    return load_spec({spec_ref!r}).kernel, None'''


def _literal(config: Any) -> str | None:
    """``repr(config)`` when it evaluates back to an equal config (numpy scalars aside), else None."""
    import numpy as np

    text = repr(dict(config))
    try:
        return text if eval(text, {"np": np}) == dict(config) else None
    except Exception:
        return None


def upstream_entries(records: Iterable[Any], spec: Any, spec_ref: str | None, out_dir: Path) -> list[dict[str, Any]]:
    """The report's records of ``attribution.Upstream`` limitations, each with its reproducer."""
    return [{**record.entry(), **write_upstream_reproducer(record, spec, spec_ref, out_dir)} for record in records]


def write_upstream_reproducer(record: Any, spec: Any, spec_ref: str | None, out_dir: Path) -> dict[str, Any]:
    """Write the plain-jax reproducer of one limitation: ``{"reproducer": path}``, or
    ``{"reproducer": None, "reproducer_missing": why}``."""
    import jax

    from pallas_verify.attribution import witness_mode
    from pallas_verify.backends import registry

    source = kernel_module(spec.kernel)
    if source is None and spec_ref is None:
        return {"reproducer": None, "reproducer_missing": (
            "the kernel is no module attribute and the spec is not defined at module level, so no script "
            "can load it")}
    stem = file_stem(record.kernel, "upstream", record.backend, *filter(None, [record.transform]))
    out_dir.mkdir(parents=True, exist_ok=True)
    script = out_dir / f"{stem}.py"
    config_src = _literal(record.config)
    save_case(out_dir / f"{stem}.npz", record.inputs, None if config_src is not None else record.config)
    if source is not None:
        kernel_file = f"{stem}-kernel.py"
        (out_dir / kernel_file).write_text(f"# {source.path}, pruned to plain jax by pallas-verify\n{source.source}")
        loader = _FROM_MODULE.format(directory=str(Path(source.path).parent), file=kernel_file,
                                     attribute=source.attribute, accepts=source.accepts)
        how = (f"This script needs jax and numpy only: the kernel is {source.attribute} of {source.path}, "
               f"copied beside it as {kernel_file} without its spec.")
    else:
        loader = _FROM_SPEC.format(spec_ref=spec_ref)
        how = ("The kernel is no module attribute (a lambda or a closure), so this script loads it through its "
               "spec, with pallas-verify; make it a module function to get a script that needs jax alone.")
    script.write_text(_TEMPLATE.format(
        kernel=record.kernel, backend=record.backend, witness=record.clean_on, error=record.error,
        witnessed=(f"{record.clean_on} runs the same example" if record.clean_on else
                   "no other interpreter runs it either (" + ("; ".join(
                       f"{k}: {v}" for k, v in record.also_failing.items()) or "none here serves it") + ")"),
        runs_witness=(f"it runs the example as {record.clean_on} does (it works), then " if record.clean_on
                      else ""),
        frame=record.frame, site=f"\n  operation: {record.site}" if record.site else "", version=jax.__version__,
        how=how, script=script.name, config=config_src or "None  # not a Python literal: in the .npz",
        transform=record.transform, tpu="tpu" in spec.platforms,
        failing=registry.get(record.backend).interpret_source(record.mode),
        witness_src="None" if record.clean_on is None else registry.get(record.clean_on).interpret_source(
            witness_mode(record.clean_on)),
        loader=loader))
    return {"reproducer": str(script.resolve())}
