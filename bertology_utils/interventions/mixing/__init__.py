"""Context mixing: how much each token's representation draws on every other token, beyond raw weights.

A raw attention weight says how much a head looks at a token, not how much of that token
reaches the output: the value vector may be tiny, and the residual stream carries most of
each token through every layer. This package computes, from hooks on the model's own forward
pass (any architecture registered in :mod:`bertology_utils.core.architectures`), the maps the
literature proposes instead. One method, one file; the package registers the built-in ones, in the order
:data:`METHODS` lists them (:func:`_register_built_in`), and :func:`register` adds others. Per layer
(token level, rows = the receiving token):

``attention``      the raw weights alpha^h_ij, per head (``attention.py``);
``norm``           Kobayashi et al. (2020): ||alpha^h_ij f_h(x_j)||, f_h(x) = W_O^h (W_V^h x + b_V^h), per head
                   (``norm.py``);
``norm_layer``     the norm of the heads' summed vectors, ||sum_h alpha^h_ij f_h(x_j)|| (``norm_layer.py``);
``alti_layer``     Ferrando et al. (2022): the contributions of each input to the attention block's
                   output, residual and layer norm included (``alti.py``);
``value_zeroing``  Mohebbi et al. (2023): zero token j's value vectors (every head) in one layer and
                   measure the cosine distance of each output of that layer from the original,
                   rows normalised to sum to 1 (``value_zeroing.py``);
``globenc_layer``  Modarressi et al. (2022): N_Enc, the norm of input j's part of the whole layer's output i,
                   ALTI's decomposition carried through the second residual and layer norm, the feed-forward
                   block left out (``globenc.py``);

and across layers (row i of layer l: how much output token i at layer l draws on input token j):

``rollout``  Abnar & Zuidema (2020): A_l = 0.5 mean_h(alpha_l) + 0.5 I, rows renormalised,
             multiplied through the layers (``rollout.py``: :class:`Rollout` wraps any per-layer method);
``flow``     their attention flow: the maximum flow from input j to node i of layer l in the
             graph whose edges carry A_l, rows normalised to sum to 1 as in their code
             (``flow.py``; O(n^4) per item, so its inputs have a length limit: its options
             ``flow_max_tokens`` and ``flow_rows``, which :func:`mixing_maps` and the map sources pass on);
``alti``     ALTI as the paper defines it: ``alti_layer`` rolled out;
``value_zeroing_rollout``  ``value_zeroing`` rolled out (Mohebbi et al.'s aggregate);
``globenc``  GlobEnc as the paper defines it: ``globenc_layer``'s norms multiplied through the layers, rows
             rescaled to sum to 1;
``decompx``  Modarressi et al. (2023): each token's vector decomposed into one part per input token and carried
             through every layer (feed-forward block included), the parts' norms, rows rescaled to sum to 1
             (``decompx.py``, which also registers the attribution reference ``decompx_logit``: the parts carried
             on through the classifier head). A per-layer method whose maps are already across layers.

:func:`mixing_maps` computes any of them for a batch from one traced forward pass;
:class:`MixingMaps` is one method as a map source for the extraction pipeline
(:func:`bertology_utils.attention.extraction.attention_for`, ``extract_attention``, ``extract_cached``
with ``maps=``): batching, word-level conversion, stores and resumption are extraction's own.
:func:`mixing_for` gives several methods' word-level maps from one pass of that pipeline.
:func:`faithfulness` compares each method's input attribution with the attribution references
(:data:`bertology_utils.interventions.references.REFERENCES`) as Abnar & Zuidema's Table 3 does.

An attention block is post-LN, LN(x + W_O ctx + b_O) (BERT, RoBERTa, XLM-R, CamemBERT, ELECTRA,
DistilBERT, MPNet, DeBERTa-v2), or pre-LN, x + W_O ctx(LN(x)) + b_O (ModernBERT, whose fused query-key-value
projection gives the values too). :func:`trace` checks the model's decomposition whenever a method reads more
than the attention weights, and refuses a model where it does not hold; ALBERT, whose layers share one
module, gets the methods that read only the weights (:func:`unsupported_methods` says which and why).
"""

from bertology_utils.interventions.mixing.alti import AltiLayer, alti_contributions, transformed_vectors
from bertology_utils.interventions.mixing.attention import Attention
from bertology_utils.interventions.mixing.base import (
    AGGREGATED,
    LAYER_METHODS,
    METHODS,
    PARTS,
    REGISTRY,
    AcrossLayers,
    LayerMethod,
    LayerTrace,
    MixingMethod,
    get_method,
    register,
    trace,
    unsupported_methods,
)
from bertology_utils.interventions.mixing.decompx import DecompX, DecompXLogit, decompose, decompx_logits
from bertology_utils.interventions.mixing.faithfulness import faithfulness, faithfulness_summary, input_attribution
from bertology_utils.interventions.mixing.flow import FLOW_MAX_TOKENS, Flow, attention_flow
from bertology_utils.interventions.mixing.globenc import GlobEncLayer, encoder_vectors, globenc_contributions
from bertology_utils.interventions.mixing.maps import MixingMaps, mixing_for, mixing_maps
from bertology_utils.interventions.mixing.norm import Norm, head_vectors
from bertology_utils.interventions.mixing.norm_layer import NormLayer
from bertology_utils.interventions.mixing.plots import plot_faithfulness, plot_shares, plot_side_by_side
from bertology_utils.interventions.mixing.rollout import Rollout, aggregate, residual_attention
from bertology_utils.interventions.mixing.value_zeroing import ValueZeroing, value_zeroing


def _register_built_in() -> None:
    """Register the built-in methods, in this order: :data:`METHODS` lists the per-layer ones first, then those
    across layers, each in the order registered here (records and tables follow it)."""
    for method in (
        Attention(),
        Norm(),
        NormLayer(),
        Rollout("rollout", of="attention", residual=0.5),
        Flow(),
        AltiLayer(),
        Rollout("alti", of="alti_layer"),
        ValueZeroing(),
        Rollout("value_zeroing_rollout", of="value_zeroing"),
        GlobEncLayer(),
        Rollout("globenc", of="globenc_layer", renormalise=True),
        DecompX(),
    ):
        register(method)


_register_built_in()

__all__ = [
    "METHODS",
    "LAYER_METHODS",
    "AGGREGATED",
    "FLOW_MAX_TOKENS",
    "REGISTRY",
    "PARTS",
    "register",
    "get_method",
    "unsupported_methods",
    "MixingMethod",
    "LayerMethod",
    "AcrossLayers",
    "Attention",
    "Norm",
    "NormLayer",
    "AltiLayer",
    "ValueZeroing",
    "GlobEncLayer",
    "DecompX",
    "DecompXLogit",
    "Rollout",
    "Flow",
    "LayerTrace",
    "trace",
    "mixing_maps",
    "MixingMaps",
    "mixing_for",
    "head_vectors",
    "transformed_vectors",
    "alti_contributions",
    "encoder_vectors",
    "globenc_contributions",
    "decompose",
    "decompx_logits",
    "value_zeroing",
    "residual_attention",
    "aggregate",
    "attention_flow",
    "input_attribution",
    "faithfulness",
    "faithfulness_summary",
    "plot_shares",
    "plot_faithfulness",
    "plot_side_by_side",
]
