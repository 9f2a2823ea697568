"""Runs under perturbations that keep the science the same: what a reference's tolerances are measured on.

Another CPU computes the same forward passes with other kernels: oneDNN picks them by the instruction
set, so lowering ``ONEDNN_MAX_CPU_ISA`` gives, on this machine, the float results of an older CPU
(an AVX2 machine's on an AVX-512 one, an SSE4.1 machine's on an AVX2 one). Another thread count
sums in another order. Products in bf16, where the CPU has it natively, lower the precision itself: such a
run holds the verdicts, not the numbers (:attr:`Perturbation.numbers`). A refresh (``bertology run --update-reference DIR --perturb``) runs the same
notebooks under each of :func:`standard_perturbations`, every run with a cache of its own (a shared
cache would hand back the first run's numbers), and :func:`~bertology_utils.run.refresh.update_references`
sets each metric's tolerance from how far it moved.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertology_utils.core import machine_environment, settings, threads
from bertology_utils.run import harness

__all__ = [
    "Perturbation",
    "ISA_LEVELS",
    "BF16_PRODUCTS",
    "BF16_FLAGS",
    "capped_flags",
    "caps_said",
    "standard_perturbations",
    "run_perturbed",
    "perturbed_run_name",
]

#: oneDNN's instruction-set levels a run can be lowered to (``ONEDNN_MAX_CPU_ISA``), highest first, each with
#: the CPU flag that says the machine has more than it.
ISA_LEVELS: tuple[tuple[str, str], ...] = (
    ("AVX512_CORE", "avx512_vnni"),
    ("AVX2", "avx512f"),
    ("AVX", "avx2"),
    ("SSE41", "avx"),
)


@dataclass(frozen=True)
class Perturbation:
    """A change of machine that must not change the science: its name (part of a run name), the
    environment variables it sets for the kernels, and why it is a fair test."""

    name: str
    environment: Mapping[str, str] = field(default_factory=dict)
    why: str = ""
    #: Whether its numbers set the tolerances. False: it lowers the arithmetic's precision, its numbers move
    #: past any float tolerance worth keeping, and only its verdicts are held to the reference's.
    numbers: bool = True


#: Float32 matrix products computed in bf16, as a CPU with native bf16 (AVX-512 bf16, AMX) may be set to:
#: verdicts only (on the small suite many numbers moved past any float tolerance worth keeping; no verdict did).
BF16_PRODUCTS = Perturbation(
    "bf16-products",
    {settings.FP32_PRODUCTS_ENV: "bf16"},
    "float32 products computed in bf16 (this CPU has native bf16): its verdicts must hold, its numbers not",
    numbers=False,
)
#: CPU flags that say the machine multiplies bf16 natively.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})

#: The instruction-set caps a run's environment may set, each (variable, level) with the first CPU flag, in
#: ``machine_environment``'s order, whose kernels it goes without: oneDNN's levels (:data:`ISA_LEVELS`) and ATen's.
_CAP_CUTS: dict[tuple[str, str], str] = {
    **{("ONEDNN_MAX_CPU_ISA", level): flag for level, flag in ISA_LEVELS},
    ("ATEN_CPU_CAPABILITY", "AVX2"): "avx512f",
    ("ATEN_CPU_CAPABILITY", "DEFAULT"): "avx",
}


def capped_flags(environment: Mapping) -> tuple[list[str], dict[str, str]]:
    """The CPU flags whose kernels a run could use: the machine's, cut where the instruction-set caps its
    environment sets begin to go without (``ONEDNN_MAX_CPU_ISA``, ``ATEN_CPU_CAPABILITY``); and those caps.

    :param environment: :func:`machine_environment`'s, or a run.json's record of it.
    :returns: the flags (in their recorded order), and each cap set, by variable. A level this does not know cuts
        nothing, but is returned with the others.
    """
    flags = list(environment.get("cpu_flags") or [])
    caps = {name: str(environment[name]) for name in dict.fromkeys(n for n, _ in _CAP_CUTS) if environment.get(name)}
    for name, level in caps.items():
        cut = _CAP_CUTS.get((name, level.upper()))
        if cut in flags:
            flags = flags[: flags.index(cut)]
    return flags, caps


def caps_said(caps: Mapping[str, str]) -> str:
    """:func:`capped_flags`' caps in words, as records and tables name them: "ONEDNN_MAX_CPU_ISA=AVX2 and ...".

    :param caps: the caps, by variable.
    :returns: the words ("" for none).
    """
    return " and ".join(f"{name}={level}" for name, level in caps.items())


def standard_perturbations(environment: Mapping | None = None) -> list[Perturbation]:
    """The perturbations this machine offers: each oneDNN level below its CPU's own, one thread instead of
    several when it has more than one core, and :data:`BF16_PRODUCTS` where the CPU has native bf16.
    ``environment``: :func:`machine_environment`'s."""
    environment = machine_environment() if environment is None else environment
    flags = set(environment.get("cpu_flags") or [])
    found = [
        Perturbation(
            f"isa-{level.lower()}",
            {"ONEDNN_MAX_CPU_ISA": level},
            f"the float kernels of a CPU with at most {level} (this one has {flag})",
        )
        for level, flag in ISA_LEVELS
        if flag in flags
    ]
    if (environment.get("cores") or 1) > 1:
        found.append(
            Perturbation(
                "threads-1",
                dict.fromkeys(threads.THREAD_VARIABLES, "1"),
                "one thread: every sum over cores in another order",
            )
        )
    if flags & BF16_FLAGS:
        found.append(BF16_PRODUCTS)
    return found


def perturbed_run_name(run_name: str, perturbation: Perturbation) -> str:
    """The run name of ``run_name`` repeated under ``perturbation``."""
    return f"{run_name}.perturbed-{perturbation.name}"


def run_perturbed(
    perturbation: Perturbation,
    notebooks: Iterable[str | os.PathLike],
    *,
    run_name: str,
    results_root: str | os.PathLike | None = None,
    **run_options: Any,
) -> harness.RunReport:
    """Run ``notebooks`` under ``perturbation`` into ``perturbed_run_name(run_name, perturbation)``, one at a
    time, with a fresh cache that is removed afterwards; ``run_options`` go to ``run_notebooks``."""
    with (
        tempfile.TemporaryDirectory(prefix="bertology-perturbed-cache-") as cache,
        settings.environment({**perturbation.environment, settings.CACHE_DIR_ENV: str(Path(cache))}),
    ):
        return harness.run_notebooks(
            notebooks,
            run_name=perturbed_run_name(run_name, perturbation),
            results_root=results_root,
            **{**run_options, "jobs": 1},
        )
