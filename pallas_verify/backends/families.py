"""The compile families, the chips and GPUs they target, as data, and how to recognise them.

This is the one table of compile backends: ``FAMILIES`` says, per family, the kernel
platform it serves, the extra that provides it, the platform it lowers for, the Pallas
lowerings it compiles and how a kernel asks for them, and (through the platform) its
targets. The family names and the dtypes each takes as kernel operands are owned by
``strategies`` (which may not import pallas_verify, and which loads jax, which this
module must not); tests/backends/test_families.py holds the two to the same names.

Everything here is pure (no jax import): the target tables name each chip, the
``device_kind`` its compile-only device has, the ``device_kind`` strings real hardware
reports, the accelerator type a Ray cluster advertises for it, and for GPUs the numbers
of the XLA ``GpuTargetConfig`` used to compile without a GPU. ``targets_of`` maps the
device kinds jax sees to our target names.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "FAMILIES",
    "GPU_TARGETS",
    "SANITIZERS",
    "TPU_CHIPS",
    "Family",
    "GpuTarget",
    "TpuChip",
    "accelerators_present",
    "apply_jax_env_defaults",
    "family",
    "gpu_target_config",
    "jax_env_defaults",
    "target_of",
    "targets_of",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TpuChip:
    """A TPU generation.

    Attributes:
      name: our name (``"v5e"``), the part after ``mosaic_tpu:``.
      device_kind: the kind of its libtpu compile-only device (``"TPU v5 lite"``).
      topology: the libtpu topology name of one chip (``"v5e=1x1"``).
      real_kinds: every ``device_kind`` real hardware of this generation reports.
      ray_type: the accelerator type Ray advertises for it (``ray.util.accelerators``).
    """

    name: str
    device_kind: str
    topology: str
    real_kinds: frozenset[str]
    ray_type: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuTarget:
    """An NVIDIA GPU, described as much as a deviceless compile needs.

    Attributes:
      name: our name (``"h100"``), the part after ``triton:`` / ``mosaic_gpu:``.
      device_kind: the ``device_description_str`` of its target config.
      real_prefixes: real devices whose ``device_kind`` starts with one of these are this
        GPU: the parts of the same processor (an H200 is an H100's Hopper die, compute
        capability 9.0a and 132 multiprocessors, with more memory), which run what is
        compiled for it.
      compute_capability: ``(major, minor)``.
      accelerated: True for the ``a`` feature set (sm_90a, sm_100a).
      core_count: streaming multiprocessors.
      smem_per_block_optin: the most shared memory one block may opt into, bytes.
      smem_per_core: shared memory per multiprocessor, bytes.
      memory_bytes: device memory, bytes.
      ray_type: the accelerator type Ray advertises for it (``ray.util.accelerators``).
    """

    name: str
    device_kind: str
    ray_type: str
    real_prefixes: tuple[str, ...]
    compute_capability: tuple[int, int]
    accelerated: bool
    core_count: int
    smem_per_block_optin: int
    smem_per_core: int
    memory_bytes: int


#: Per kernel platform, the interpreter that sanitizes it: the one whose runs check races,
#: out-of-bounds accesses and reads of uninitialized memory (the HLO interpreter checks
#: outputs, and masked lanes' bounds, only). A PASS no sanitizer judged says so
#: (``reports.report.unsanitized``).
SANITIZERS: Mapping[str, str] = {"tpu": "tpu_interpret", "gpu": "gpu_interpret"}

TPU_CHIPS: tuple[TpuChip, ...] = (
    TpuChip(name="v4", ray_type="TPU-V4", topology="v4=1x1x1", device_kind="TPU v4", real_kinds=frozenset({"TPU v4"})),
    TpuChip(name="v5e", ray_type="TPU-V5LITEPOD", topology="v5e=1x1", device_kind="TPU v5 lite", real_kinds=frozenset({"TPU v5 lite", "TPU v5e"})),
    TpuChip(name="v5p", ray_type="TPU-V5P", topology="v5p=1x1x1", device_kind="TPU v5", real_kinds=frozenset({"TPU v5", "TPU v5p"})),
    TpuChip(name="v6e", ray_type="TPU-V6E", topology="v6e=1x1", device_kind="TPU v6 lite", real_kinds=frozenset({"TPU v6 lite", "TPU v6e"})),
    TpuChip(name="7x", ray_type="TPU-V7X", topology="tpu7x=1x1x1", device_kind="TPU7x", real_kinds=frozenset({"TPU7x", "TPU 7x"})),
)

GPU_TARGETS: tuple[GpuTarget, ...] = (
    GpuTarget(
        name="a100", ray_type="A100", device_kind="NVIDIA A100-SXM4-40GB", real_prefixes=("NVIDIA A100",),
        compute_capability=(8, 0), accelerated=False, core_count=108,
        smem_per_block_optin=166912, smem_per_core=167936, memory_bytes=42331013120,
    ),
    GpuTarget(
        name="h100", ray_type="H100", device_kind="NVIDIA H100 80GB HBM3", real_prefixes=("NVIDIA H100", "NVIDIA H200", "NVIDIA H800", "NVIDIA GH200"),
        compute_capability=(9, 0), accelerated=True, core_count=132,
        smem_per_block_optin=232448, smem_per_core=233472, memory_bytes=84942979072,
    ),
    GpuTarget(
        name="b200", ray_type="B200", device_kind="NVIDIA B200", real_prefixes=("NVIDIA B200",),
        compute_capability=(10, 0), accelerated=True, core_count=148,
        smem_per_block_optin=232448, smem_per_core=233472, memory_bytes=191514411008,
    ),
)



@dataclasses.dataclass(frozen=True, kw_only=True)
class Family:
    """A compiler family: the part of a backend name before ``:``.

    Attributes:
      name: ``"mosaic_tpu"``, ``"triton"``, ``"mosaic_gpu"``.
      platform: the kernel platform it serves (``"tpu"`` or ``"gpu"``, as a KernelSpec's
        ``platforms`` names it).
      extra: the pallas-verify extra that installs its compiler.
      lowering_platform: the platform jax lowers for (``"tpu"``, ``"cuda"``).
      lowerings: the Pallas lowerings it compiles (``"default"`` is a pallas_call
        without ``compiler_params``).
      how: how a kernel asks for this family's lowering, as a kernel author writes it.
    """

    name: str
    platform: str
    extra: str
    lowering_platform: str
    lowerings: frozenset[str]
    how: str

    @property
    def targets(self) -> tuple[TpuChip, ...] | tuple[GpuTarget, ...]:
        """The chips or GPUs this family compiles for."""
        return TPU_CHIPS if self.platform == "tpu" else GPU_TARGETS


FAMILIES: tuple[Family, ...] = (
    Family(name="mosaic_tpu", platform="tpu", extra="tpu", lowering_platform="tpu",
           lowerings=frozenset({"default", "mosaic_tpu"}),
           how="pltpu.CompilerParams (or no compiler_params) on pl.pallas_call"),
    Family(name="triton", platform="gpu", extra="gpu", lowering_platform="cuda",
           lowerings=frozenset({"default", "triton"}),
           how="pl.triton.CompilerParams (or no compiler_params) on pl.pallas_call"),
    Family(name="mosaic_gpu", platform="gpu", extra="gpu", lowering_platform="cuda",
           lowerings=frozenset({"mosaic_gpu"}), how="plgpu.kernel"),
)

def family(name: str) -> Family:
    """The family named ``name`` (``"mosaic_tpu"``); KeyError naming the families otherwise."""
    for f in FAMILIES:
        if f.name == name:
            return f
    raise KeyError(f"family={name!r} is not a compile family; choose from {[f.name for f in FAMILIES]}.")


def target_of(platform: str, device_kind: str) -> str | None:
    """Our target name for a device jax reports, or None when we do not target it.

    ``platform`` is ``Device.platform`` (``"tpu"``, ``"gpu"``, ``"cuda"``, ...).
    """
    if platform == "tpu":
        kind = " ".join(device_kind.split())
        return next((c.name for c in TPU_CHIPS if kind in c.real_kinds), None)
    if platform in ("gpu", "cuda"):
        return next((g.name for g in GPU_TARGETS if device_kind.startswith(g.real_prefixes)), None)
    return None


def targets_of(devices: Iterable[tuple[str, str]]) -> frozenset[str]:
    """The target names among ``(platform, device_kind)`` pairs of real devices."""
    return frozenset(t for p, k in devices if (t := target_of(p, k)) is not None)


def gpu_target_config(target: GpuTarget) -> str:
    """The ``GpuTargetConfig`` text proto the CUDA plugin compiles for."""
    major, minor = target.compute_capability
    extension = " feature_extension: ACCELERATED_FEATURES" if target.accelerated else ""
    return f"""gpu_device_info {{
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: {target.smem_per_core}
  threads_per_core_limit: 2048
  core_count: {target.core_count}
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  device_memory_size: {target.memory_bytes}
  shared_memory_per_block_optin: {target.smem_per_block_optin}
  cuda_compute_capability {{ major: {major} minor: {minor}{extension} }}
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  name: "{target.device_kind}"
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 8 }}
device_description_str: "{target.device_kind}"
"""


def jax_env_defaults(environ: Mapping[str, str], *, tpu: bool, gpu: bool) -> dict[str, str]:
    """Variables to set before jax is imported so that every backend works here.

    With no accelerator attached: ``JAX_PLATFORMS=cpu`` (jax runs on the CPU, the
    interpreters work, libtpu compile-only devices and the CUDA plugin's deviceless
    compiles still work) plus placeholder Cloud TPU variables that keep libtpu from
    printing warnings while it looks for a TPU VM's metadata. With an accelerator
    attached jax finds it; with a GPU, jax is told not to take most of its memory at
    start (several processes share it). Variables already set win.
    """
    defaults: dict[str, str] = {}
    if not tpu and not gpu:
        defaults["JAX_PLATFORMS"] = "cpu"
    if gpu:
        # The compiled backends run in worker processes beside the parent, all on the one
        # GPU: each jax process would otherwise take 75% of its memory at start and the
        # second would fail to allocate.
        defaults["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if not tpu:
        # Compile-only use: let several processes (xdist workers, compile workers) load
        # libtpu at once instead of failing on /tmp/libtpu_lockfile.
        defaults["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
        defaults["TPU_WORKER_HOSTNAMES"] = "localhost"
        defaults["TPU_ACCELERATOR_TYPE"] = "v5litepod-1"
    return {k: v for k, v in defaults.items() if k not in environ}


def accelerators_present(root: Path = Path("/")) -> tuple[bool, bool]:
    """(TPU present, NVIDIA GPU present) on this host, without importing jax.

    A TPU is a PCI device of Google's vendor id 0x1ae0; an NVIDIA GPU shows as
    ``/dev/nvidia0`` (or a PCI device of vendor 0x10de with a display class).
    """
    tpu = gpu = False
    for device in (root / "sys/bus/pci/devices").glob("*"):
        vendor = _read(device / "vendor")
        tpu = tpu or vendor == "0x1ae0"
        gpu = gpu or (vendor == "0x10de" and _read(device / "class").startswith("0x03"))
    return tpu, gpu or (root / "dev/nvidia0").exists()


def apply_jax_env_defaults(environ: dict[str, str] | None = None, *, libtpu_only: bool = False) -> dict[str, str]:
    """Set ``jax_env_defaults`` in ``environ`` (default ``os.environ``); returns what was set.

    Call it before jax is imported. ``libtpu_only=True`` sets only the Cloud TPU
    placeholders, which may still be set after jax is imported, until libtpu is loaded.
    """
    env = os.environ if environ is None else environ
    tpu, gpu = accelerators_present()
    changes = jax_env_defaults(env, tpu=tpu, gpu=gpu)
    if libtpu_only:
        changes = {k: v for k, v in changes.items() if k.startswith("TPU_")}
    env.update(changes)
    return changes


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def missing_compiler(name: str) -> str | None:
    """Why family ``name``'s compiler cannot run here (its extra is not installed, or
    Mosaic GPU has no ptxas), or None. Looks for files only: no import of jax."""
    import importlib.util

    extra = family(name).extra
    if extra == "tpu":
        if importlib.util.find_spec("libtpu") is None:
            return f"libtpu is not installed: pip install 'pallas-verify[{extra}]'"
        return None
    if _cuda_plugin() is None:
        return f"the CUDA plugin is not installed: pip install 'pallas-verify[{extra}]'"
    if name == "mosaic_gpu" and _ptxas() is None:
        return ("ptxas was not found on PATH nor in /usr/local/cuda/bin: Mosaic GPU assembles "
                "with the CUDA toolkit's ptxas; install the CUDA toolkit and put ptxas on PATH")
    return None


def _cuda_plugin() -> str | None:
    """The installed CUDA plugin of jax (``jax_plugins.xla_cuda12`` or ``xla_cuda13``: jax's
    ``cuda12`` and ``cuda13`` extras), or None."""
    import importlib.util

    if importlib.util.find_spec("jax_plugins") is None:
        return None
    return next((f"jax_plugins.{name}" for name in ("xla_cuda12", "xla_cuda13")
                 if importlib.util.find_spec(f"jax_plugins.{name}") is not None), None)


def _ptxas() -> str | None:
    import shutil

    default = Path("/usr/local/cuda/bin/ptxas")
    return shutil.which("ptxas") or (str(default) if default.exists() else None)
