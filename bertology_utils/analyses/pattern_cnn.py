"""A small convolutional network that classifies attention maps into Kovaleva et al.'s pattern types.

Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT", https://arxiv.org/abs/1908.08593) trained a CNN on
attention maps resized to a fixed size. :func:`map_images` resizes a map by area averaging and adds three fixed
position channels (special-token columns, same-segment cells, the diagonal band) so that what resizing blurs
stays known; :class:`CNNClassifier` is the network, seeded and deterministic, saved as safetensors plus JSON.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from torch import nn

from bertology_utils.analyses.pattern_maps import Map, checked_types, normalised_maps, stack_maps, with_anchors
from bertology_utils.analyses.pattern_types import TYPES, template_scores
from bertology_utils.attention.alignment import WORD
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_path, atomic_write_text
from bertology_utils.core.typing import SampleValues, WordMap, WordValues

__all__ = ["map_images", "CNNClassifier"]


def map_images(
    attention: WordMap, word_kinds: Sequence | WordValues, segments: Sequence | WordValues, size: int = 32
) -> np.ndarray:
    """Maps as images: the square root of the attention and three position channels (special-token columns,
    same-segment cells, the band ``|i - j| <= 1``), each resized by area averaging (a map shorter than ``size``
    is repeated cell by cell).

    :param attention: word maps, (..., W, W).
    :param word_kinds: each word's kind, (W,).
    :param segments: each word's segment, (W,).
    :param size: the images' side.
    :returns: float32, (..., 4, size, size).
    """
    p = torch.as_tensor(normalised_maps(attention), dtype=torch.float32)
    kinds = torch.as_tensor(np.asarray(word_kinds))
    seg = torch.as_tensor(np.asarray(segments))
    n = p.shape[-1]
    lead = p.shape[:-2]
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    fixed = torch.stack(
        [
            (kinds != WORD)[None, :].expand(n, n).float(),
            (seg[:, None] == seg[None, :]).float(),
            ((i - j).abs() <= 1).float(),
        ]
    )
    flat = p.reshape(-1, 1, n, n).sqrt()
    resize = functools.partial(nn.functional.adaptive_avg_pool2d, output_size=size)
    images = torch.cat([resize(flat), resize(fixed[None]).expand(flat.shape[0], -1, -1, -1)], dim=1)
    return images.reshape(*lead, 4, size, size).numpy()


class _Net(nn.Module):
    def __init__(self, n_classes: int, width: int):
        super().__init__()

        def block(a: int, b: int) -> list[nn.Module]:
            return [nn.Conv2d(a, b, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]

        self.body = nn.Sequential(
            *block(4, width), *block(width, 2 * width), *block(2 * width, 2 * width), nn.AdaptiveAvgPool2d(2)
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(8 * width, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class CNNClassifier(ClassifierMixin, BaseEstimator):
    """A small CNN on :func:`map_images` (Adam, balanced cross-entropy, fixed epochs; seeded), fitted on the
    labelled maps plus ``anchors`` planted maps of each type, as
    :class:`~bertology_utils.analyses.pattern_models.FeatureClassifier`.

    :param size: the images' side.
    :param width: channels of the first convolution.
    :param epochs: passes over the maps.
    :param lr: Adam's learning rate.
    :param weight_decay: Adam's weight decay.
    :param batch_size: maps per step.
    :param anchors: planted maps of each type added to the fit.
    :param seed: the seed of the weights, the batches and the anchors.
    """

    def __init__(
        self,
        size: int = 32,
        width: int = 16,
        epochs: int = 60,
        lr: float = 3e-3,
        weight_decay: float = 1e-4,
        batch_size: int = 32,
        anchors: int = 10,
        seed: int = 0,
    ):
        self.size, self.width, self.epochs, self.lr = size, width, epochs, lr
        self.weight_decay, self.batch_size, self.anchors, self.seed = weight_decay, batch_size, anchors, seed

    def images(self, X: Sequence[Map]) -> np.ndarray:
        """The maps as this model's images.

        :param X: maps, each (attention (W, W), word kinds (W,), segments (W,)).
        :returns: (N, 4, size, size).
        """
        return stack_maps(X, functools.partial(map_images, size=self.size))

    def fit(self, X: Sequence[Map], y: Sequence[str] | np.ndarray) -> CNNClassifier:
        """Fit on the maps and the anchors.

        :param X: maps, each (attention (W, W), word kinds (W,), segments (W,)).
        :param y: their types, (n,).
        :returns: self.
        """
        X, y = with_anchors(X, y, self.anchors, self.seed)
        return self.fit_images(self.images(X), y)

    def fit_images(self, images: np.ndarray, y: Sequence[str] | np.ndarray) -> CNNClassifier:
        """Fit on precomputed images (no anchors added).

        :param images: (n, 4, size, size).
        :param y: their types, (n,).
        :returns: self.
        """
        y = checked_types(y)
        self.classes_ = np.asarray(sorted(set(y), key=TYPES.index), dtype=object)
        target = torch.as_tensor([list(self.classes_).index(v) for v in y])
        counts = torch.bincount(target, minlength=len(self.classes_)).float()
        weight = counts.sum() / (len(counts) * counts.clamp_min(1))
        x = torch.as_tensor(images)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.net_ = _Net(len(self.classes_), self.width)
            optimiser = torch.optim.Adam(self.net_.parameters(), lr=self.lr, weight_decay=self.weight_decay)
            generator = torch.Generator().manual_seed(self.seed)
            loss = nn.CrossEntropyLoss(weight=weight)
            self.net_.train()
            for _ in range(self.epochs):
                for rows in torch.randperm(len(x), generator=generator).split(self.batch_size):
                    optimiser.zero_grad()
                    loss(self.net_(x[rows]), target[rows]).backward()
                    optimiser.step()
            self.net_.eval()
        return self

    @torch.no_grad()
    def logits_images(self, images: np.ndarray, batch: int = 4096) -> np.ndarray:
        """Class logits of precomputed images.

        :param images: (..., 4, size, size).
        :param batch: images per forward pass.
        :returns: (..., C).
        """
        x = torch.as_tensor(images).reshape(-1, 4, self.size, self.size)
        out = torch.cat([self.net_(x[i : i + batch]) for i in range(0, len(x), batch)]) if len(x) else x.new_zeros(0)
        return out.reshape(*images.shape[:-3], len(self.classes_)).numpy()

    def predict_images(self, images: np.ndarray) -> np.ndarray:
        """The type of precomputed images.

        :param images: (..., 4, size, size).
        :returns: types, (...).
        """
        return self.classes_[self.logits_images(images).argmax(-1)]

    def predict_proba(self, X: Sequence[Map]) -> np.ndarray:
        """Each map's probability of each class (:attr:`classes_` order).

        :param X: maps, each (attention (W, W), word kinds (W,), segments (W,)).
        :returns: (N, C).
        """
        return torch.softmax(torch.as_tensor(self.logits_images(self.images(X))), -1).numpy()

    def predict(self, X: Sequence[Map]) -> SampleValues:
        """Each map's type.

        :param X: maps, each (attention (W, W), word kinds (W,), segments (W,)).
        :returns: types, (N,).
        """
        return self.predict_images(self.images(X))

    def types_and_scores(
        self, attention: WordMap, word_kinds: Sequence | WordValues, segments: Sequence | WordValues
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """As :meth:`~bertology_utils.analyses.pattern_models.TemplateClassifier.types_and_scores`, the types by
        this model.

        :param attention: word maps, (..., W, W).
        :param word_kinds: each word's kind, (W,).
        :param segments: each word's segment, (W,).
        :returns: the types, strings of shape ``attention.shape[:-2]``, and the template scores.
        """
        images = map_images(attention, word_kinds, segments, size=self.size)
        return self.predict_images(images), template_scores(attention, word_kinds, segments)

    def save(self, path: str | Path) -> None:
        """Write ``path`` + ``.safetensors`` (the weights) and ``.json`` (settings and classes); no pickle.

        :param path: the files' path without suffix.
        """
        from safetensors.torch import save_file

        path = Path(path)
        with atomic_path(path.with_suffix(".safetensors")) as partial:
            save_file({k: v.contiguous() for k, v in self.net_.state_dict().items()}, str(partial))
        record = {"kind": "cnn", "params": self.get_params(), "classes": [str(c) for c in self.classes_]}
        atomic_write_text(path.with_suffix(".json"), json.dumps(record, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> CNNClassifier:
        """The model :meth:`save` wrote.

        :param path: the files' path without suffix.
        :returns: the fitted model, in eval mode.
        :raises BertologyError: when the JSON is not a CNNClassifier's.
        """
        from safetensors.torch import load_file

        path = Path(path)
        record = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        if record.get("kind") != "cnn":
            raise BertologyError(f"{path.with_suffix('.json')} is not a CNNClassifier")
        model = cls(**record["params"])
        model.classes_ = np.asarray(record["classes"], dtype=object)
        model.net_ = _Net(len(model.classes_), model.width)
        model.net_.load_state_dict(load_file(str(path.with_suffix(".safetensors"))))
        model.net_.eval()
        return model
