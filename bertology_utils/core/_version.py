"""The package version and the versions of the libraries results depend on.

Apart from ``bertology_utils/__init__`` so that any layer can read them (through ``bertology_utils.core``).
"""

from __future__ import annotations

__all__ = ["__version__", "LIBRARIES", "library_versions", "machine_environment", "gpu_name", "CPU_FLAGS"]

__version__ = "0.1.0"

#: The distributions whose versions a run records, its references keep and ``bertology info`` shows:
#: those that compute or store the numbers (requirements/lock-linux-py311-cpu.txt pins them all).
LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "scipy", "scikit-learn", "zarr", "papermill")


def library_versions() -> dict[str, str | None]:
    """Python, the platform (``linux-x86_64``), this package and :data:`LIBRARIES` (None when not installed).

    Read from the installed metadata, not by importing the libraries: importing torch takes seconds.
    """
    import importlib.metadata
    import platform
    import sysconfig

    versions: dict[str, str | None] = {
        "python": platform.python_version(),
        "platform": sysconfig.get_platform(),
        "bertology_utils": __version__,
    }
    for dist in LIBRARIES:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


#: The CPU features whose kernels give float results that differ in the last bits (oneDNN picks its
#: kernels by them): AVX2, AVX-512 (and its bf16 and VNNI parts), AMX.
CPU_FLAGS = ("sse4_1", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")

#: Variables that change which kernels run or how many threads sum a result: oneDNN's and ATen's instruction-set
#: caps (together they make this CPU run an older one's kernels), the threads and the GPUs seen.
_ENVIRONMENT_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def machine_environment() -> dict[str, object]:
    """What the numbers of a run depend on besides the libraries: the CPU and its features, the cores,
    the GPU (:func:`gpu_name` of ``nvidia-smi -L``'s first line) and the variables that pick kernels and thread counts.

    Imports nothing heavy; an entry it cannot read is None.
    """
    import os
    import shutil
    import subprocess

    cpu, flags = None, []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and cpu is None:
                    cpu = value.strip()
                elif key.strip() == "flags":
                    present = set(value.split())
                    flags = [flag for flag in CPU_FLAGS if flag in present]
                    break
    except OSError:
        pass
    gpu = None
    if shutil.which("nvidia-smi"):
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False)
            gpu = gpu_name(listed.stdout.splitlines()[0]) if listed.returncode == 0 and listed.stdout.strip() else None
        except (OSError, subprocess.SubprocessError):
            gpu = None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu,
        "cpu_flags": flags,
        "cores": cores,
        "gpu": gpu,
        **{name: os.environ.get(name) for name in _ENVIRONMENT_VARIABLES},
    }


def gpu_name(listing: str) -> str:
    """The GPU's model in a line of ``nvidia-smi -L``: ``"GPU 0: NVIDIA H200 (UUID: GPU-...)"`` -> ``"NVIDIA H200"``.

    The index and the UUID name one card, not the kind of machine a run's numbers depend on; a line of another form
    is returned stripped.
    """
    import re

    return re.sub(r"^GPU \d+:\s*|\s*\(UUID:[^)]*\)\s*$", "", listing.strip()).strip()
