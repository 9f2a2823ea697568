"""Attention flow (Abnar & Zuidema 2020) against networkx's maximum flow, its rows and its length limit."""

import networkx as nx
import numpy as np
import pytest
import torch
from mixing_checks import batch_inputs

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import load_model
from bertology_utils.interventions import mixing


def networkx_flow(mixing_matrices, layer, i, j):
    graph = nx.DiGraph()
    tokens = mixing_matrices.shape[-1]
    for k in range(layer + 1):
        for a in range(tokens):  # receiving token at layer k+1
            for c in range(tokens):  # input token at layer k
                if mixing_matrices[k, a, c] > 0:
                    graph.add_edge((k, c), (k + 1, a), capacity=float(mixing_matrices[k, a, c]))
    return nx.maximum_flow_value(graph, (0, j), (layer + 1, i))


def test_attention_flow_equals_networkx_max_flow_on_small_graphs():
    rng = np.random.default_rng(0)
    for tokens, layers in ((3, 2), (4, 3), (5, 2)):
        probs = torch.from_numpy(rng.dirichlet(np.ones(tokens), size=(layers, 1, 2, tokens))).float()
        real = torch.ones(1, tokens)
        capacities = torch.stack([mixing.residual_attention(p, real)[0] for p in probs]).double().numpy()
        flow = mixing.attention_flow(capacities)
        for layer in range(layers):
            raw = np.array([[networkx_flow(capacities, layer, i, j) for j in range(tokens)] for i in range(tokens)])
            np.testing.assert_allclose(flow[layer], raw / raw.sum(-1, keepdims=True), atol=1e-5)


def test_flow_rows_and_padding(traced):
    loaded, inputs, _ = traced
    full = mixing.mixing_maps(loaded, inputs, ("flow",))["flow"]
    cls_only = mixing.mixing_maps(loaded, inputs, ("flow",), flow_rows=[0])["flow"]
    real = inputs["attention_mask"].bool()
    for layer in range(len(full)):
        torch.testing.assert_close(cls_only[layer][:, 0, 0], full[layer][:, 0, 0])
        assert torch.all(cls_only[layer][:, 0, 1:] == 0)
        for b in range(real.shape[0]):
            n = int(real[b].sum())
            torch.testing.assert_close(full[layer][b, 0, :n].sum(-1), torch.ones(n), atol=1e-5, rtol=0)
            assert torch.all(full[layer][b, 0, n:] == 0) and torch.all(full[layer][b, 0, :, n:] == 0)


def test_flow_refuses_items_over_its_length_limit(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    inputs = batch_inputs(loaded)
    with pytest.raises(BertologyError, match="limited to 5 tokens"):
        mixing.mixing_maps(loaded, inputs, ("flow",), flow_max_tokens=5)
