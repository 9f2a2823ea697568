"""What each encoder family can do, tried on its tiny random model: the capability table of the docs.

Each capability is one call; it either runs (and its result is checked by the conformance tests in
tests/unit/test_families.py and tests/unit/interventions/mixing/test_methods.py) or raises the package's own error, whose reason the table
names (the ``ArchSpec`` field behind it). ``python scripts/capability_table.py`` rewrites the table of each page
from :func:`capability_table`; tests/unit/test_families.py fails when they differ.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import torch

from bertology_utils.attention.extraction import attention_for
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus
from bertology_utils.interventions import mixing
from bertology_utils.interventions.attribution import integrated_gradients
from bertology_utils.interventions.editing import gate_heads
from bertology_utils.interventions.head_removal import prune_heads
from bertology_utils.interventions.objectives import token_batches
from bertology_utils.interventions.query_key import capture_query_key

#: The generated block (bertology_utils.present.generated) holding the table, and the pages that show it.
BLOCK = "capabilities"
PAGES = [
    Path(__file__).resolve().parents[1] / page for page in ("docs/guide/families.md", "docs/guide/context-mixing.md")
]
TEXTS = ["The old sailor reads an interesting story near the station .", "Hello world !"]


def _inputs(loaded):
    (batch,), _ = token_batches(loaded, Corpus.from_texts(TEXTS, name="t"), batch_size=len(TEXTS))
    return batch


def _gates(loaded):
    with torch.no_grad(), gate_heads(loaded, torch.ones(loaded.num_layers, loaded.num_heads)):
        loaded.model(**_inputs(loaded).model_inputs())


def _prune(loaded):
    prune_heads(copy.deepcopy(loaded.model), {0: [0]})


def _query_key(loaded):
    with torch.no_grad(), capture_query_key(loaded):
        loaded.model(**_inputs(loaded).model_inputs())


def _mixing(*methods):
    return lambda loaded: mixing.mixing_maps(loaded, _inputs(loaded).model_inputs(), methods)


def _integrated_gradients(loaded, folder):
    classifier = load_model(folder, head="sequence-classification", num_labels=2, device="cpu")
    integrated_gradients(classifier, _inputs(classifier), steps=4)


#: capability -> what tries it on a loaded base model (and its folder, for those that load a head)
CAPABILITIES = {
    "attention maps, word maps, stores": lambda loaded, folder: attention_for(
        Corpus.from_texts(TEXTS, name="t"), loaded
    ),
    "head gates (importance, L0, relevance)": lambda loaded, folder: _gates(loaded),
    "physical head pruning": lambda loaded, folder: _prune(loaded),
    "queries and keys": lambda loaded, folder: _query_key(loaded),
    "rollout, flow": lambda loaded, folder: _mixing("rollout", "flow")(loaded),
    "norms, ALTI": lambda loaded, folder: _mixing("norm", "alti")(loaded),
    "value zeroing": lambda loaded, folder: _mixing("value_zeroing")(loaded),
    "DecompX": lambda loaded, folder: _mixing("decompx")(loaded),
    "integrated gradients (inputs)": _integrated_gradients,
}


def _reason(error: Exception) -> str:
    fields = re.findall(r"ArchSpec\.(\w+)", str(error))
    if fields:
        return "no: " + ", ".join(dict.fromkeys(fields))
    if "position bias" in str(error):
        return "no: position_bias"
    return f"no: {type(error).__name__}"


def capabilities(folder) -> dict[str, str]:
    """capability -> "yes", or "no: " and the ArchSpec field whose assumption does not hold."""
    loaded = load_model(folder, device="cpu")
    out = {}
    for name, attempt in CAPABILITIES.items():
        try:
            attempt(loaded, folder)
            out[name] = "yes"
        except BertologyError as error:
            out[name] = _reason(error)
    return out


def capability_table(model_dirs: dict) -> str:
    """The markdown table of :func:`capabilities` for each family (``model_dirs``: family -> folder)."""
    rows = {family: capabilities(folder) for family, folder in model_dirs.items()}
    header = ["family", *CAPABILITIES]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join([f"`{family}`", *row.values()]) + " |" for family, row in rows.items()]
    return "\n".join(lines)
