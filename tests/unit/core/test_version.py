"""The machine a run records: the GPU's model, not the card's index or UUID."""

from __future__ import annotations

import pytest

from bertology_utils.core import gpu_name
from bertology_utils.present.report import _machine


@pytest.mark.parametrize(
    ("listing", "name"),
    [
        ("GPU 0: NVIDIA H200 (UUID: GPU-c4893557-7f5e-2a4b-b63e-914a5c05b3f0)\n", "NVIDIA H200"),
        ("GPU 12: NVIDIA A100-SXM4-80GB (UUID: GPU-1)", "NVIDIA A100-SXM4-80GB"),
        ("  NVIDIA L4  ", "NVIDIA L4"),  # another form: kept, stripped
    ],
)
def test_gpu_name_keeps_the_model(listing, name):
    assert gpu_name(listing) == name


def test_the_report_names_the_model_of_an_older_runs_gpu():
    line = _machine({"cpu": "X", "cores": 16, "gpu": "GPU 0: NVIDIA H200 (UUID: GPU-c4893557)"})
    assert line == "X, 16 cores; GPU: NVIDIA H200"
