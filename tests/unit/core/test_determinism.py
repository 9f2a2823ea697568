"""Dropout masks from a CPU generator, seeds per purpose, and the record of nondeterministic operations."""

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from bertology_utils.core.determinism import (
    HostDropout,
    derived_seed,
    deterministic_algorithms,
    host_dropout,
    training_seeds,
)


def _generator(seed: int = 3) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_derived_seeds_differ_by_purpose_and_repeat():
    assert derived_seed(0, "dropout") == derived_seed(0, "dropout")
    assert len({derived_seed(0, "dropout"), derived_seed(0, "order"), derived_seed(1, "dropout")}) == 3
    assert 0 <= derived_seed(2**40, "dropout") < 2**63


def test_training_seeds_start_at_the_base_seed():
    assert training_seeds(0, 1) == [0] and training_seeds(3, 3) == [3, 4, 5]
    assert training_seeds(np.int64(2), np.int64(2)) == [2, 3]
    for seed, seeds in ((0, 0), (0, 1.5), (0, True), (-1, 2), ("0", 2)):
        with pytest.raises(ValueError, match="whole number"):
            training_seeds(seed, seeds)


def test_host_dropout_is_torchs_rule_with_the_generators_numbers():
    x = torch.randn(4, 5, 6)
    with host_dropout(_generator()):
        out = nn.functional.dropout(x, 0.25)
    keep = torch.rand(x.shape, generator=_generator()) >= 0.25  # the same draws, outside the mode
    torch.testing.assert_close(out, x * keep / 0.75)
    assert 0 < int(keep.sum()) < keep.numel()


def test_host_dropout_ignores_the_global_seed_and_reaches_modules_and_inline_calls():
    x = torch.ones(2, 3, 8)
    layer = nn.Dropout(0.5).train()
    results = []
    for global_seed in (0, 1):
        torch.manual_seed(global_seed)
        with host_dropout(_generator()):
            results.append((layer(x), nn.functional.dropout(x, 0.5, training=True)))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    assert not torch.equal(results[0][0], results[0][1])  # the second call draws the next numbers


def test_host_dropout_draws_nothing_when_off():
    x = torch.randn(3, 4)
    generator = _generator()
    state = generator.get_state()
    with host_dropout(generator):
        assert nn.functional.dropout(x, 0.5, training=False) is x
        assert nn.functional.dropout(x, 0.0) is x
        assert torch.equal(nn.functional.dropout(x, 1.0), torch.zeros_like(x))
        y = x.clone()
        assert nn.functional.dropout(y, 1.0, inplace=True) is y and not y.any()
    assert torch.equal(generator.get_state(), state)


def test_host_dropout_in_place_and_refusals():
    x = torch.randn(5, 5)
    y = x.clone()
    with host_dropout(_generator()):
        out = nn.functional.dropout(y, 0.5, inplace=True)
    assert out is y
    torch.testing.assert_close(y, x * (torch.rand(x.shape, generator=_generator()) >= 0.5) / 0.5)
    with host_dropout(_generator()), pytest.raises(ValueError, match="between 0 and 1"):
        nn.functional.dropout(x, 1.5)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="CPU generator"):
            HostDropout(torch.Generator(device="cuda"))


def test_deterministic_algorithms_names_what_had_none_and_restores_the_setting():
    before = torch.are_deterministic_algorithms_enabled()
    filling = torch.utils.deterministic.fill_uninitialized_memory
    with pytest.warns(UserWarning, match="unrelated"), deterministic_algorithms() as missing:
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.utils.deterministic.fill_uninitialized_memory  # no NaN fill of every fresh tensor
        for _ in range(2):  # torch's own words, as its warn_only mode says them
            warnings.warn("scatter_add_cuda_kernel does not have a deterministic implementation, but ...", stacklevel=1)
        warnings.warn("unrelated", stacklevel=1)  # passed on, not swallowed
    assert missing == ["scatter_add_cuda_kernel"]
    assert torch.are_deterministic_algorithms_enabled() == before
    assert torch.utils.deterministic.fill_uninitialized_memory == filling
