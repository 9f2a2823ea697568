"""Traced layers of each tiny model and of the families whose parts the methods read."""

import pytest
from mixing_checks import PART_FAMILIES, batch_inputs

from bertology_utils.core.models import load_model
from bertology_utils.interventions import mixing


@pytest.fixture
def traced(tiny_model_dir):
    loaded = load_model(tiny_model_dir, device="cpu")
    inputs = batch_inputs(loaded)
    return loaded, inputs, mixing.trace(loaded, inputs)


@pytest.fixture(params=PART_FAMILIES)
def family_traced(request, family_model_dirs):
    loaded = load_model(family_model_dirs[request.param], device="cpu")
    inputs = batch_inputs(loaded)
    return loaded, inputs, mixing.trace(loaded, inputs)
