"""What the context-mixing tests share: texts, a batch of them, a layer's output from a full pass, the families whose parts the methods read."""

import torch

from bertology_utils.core import architectures
from bertology_utils.data import Corpus
from bertology_utils.interventions.objectives import token_batches

TEXTS = [
    "The old sailor reads a heavy wooden box near the station .",
    "Hello world !",
    "My neighbour borrowed the morning newspaper in the garden , before breakfast .",
]


def batch_inputs(loaded, texts=TEXTS):
    batches, skipped = token_batches(loaded, Corpus.from_texts(texts, name="t"), batch_size=len(texts))
    assert not skipped and len(batches) == 1
    return batches[0].model_inputs()


def layer_output(model, layer, inputs, zero_token=None):
    """Layer ``layer``'s output for ``inputs`` from a full forward pass, token ``zero_token``'s values zeroed there."""
    _, _, value = architectures.qkv(model, layer)
    kept = {}

    def zero(_m, _a, output):
        output = output.clone()
        output[:, zero_token] = 0
        return output

    def keep(_m, _a, output):
        kept["out"] = output[0] if isinstance(output, tuple) else output

    handles = [architectures.layers(model)[layer].register_forward_hook(keep)]
    if zero_token is not None:
        handles.append(value.register_forward_hook(zero))
    forward_with(model, inputs, handles)
    return kept["out"][0].double()


def forward_with(model, inputs, handles):
    """One forward pass of ``model`` on ``inputs`` without gradients, the hooks of ``handles`` removed after it."""
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()


#: Families whose layers' parts the methods read; ALBERT shares one layer's weights across depth.
PART_FAMILIES = ("xlm-roberta", "camembert", "deberta-v2", "modernbert")
