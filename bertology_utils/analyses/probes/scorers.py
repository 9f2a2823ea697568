"""The probes' scorers: torch modules giving every (dependent, candidate) pair of a batch a score.

The attention-and-words and the distances-and-words scorers run through fused autograd functions
(:class:`_PairWeighted`, :class:`_PairTanh`) that build their pair tensors in cache-sized chunks.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import torch

from bertology_utils.analyses.probes.data import Batch
from bertology_utils.core.typing import ArcScores, ItemValues

__all__ = [
    "AttentionScorer",
    "AttentionWordsScorer",
    "DistanceWordsScorer",
    "N_DISTANCE_FEATURES",
    "distance_features",
]


class AttentionScorer(torch.nn.Module):
    """Scores of the attention-only probe (Table 3 "Attn"): ``theta = [w ; u]`` over the 2K features.

    :param n_features: 2K, two features (both directions) per head, K = L x H.
    """

    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.theta = torch.nn.Parameter(torch.zeros(n_features))
        self.root_scale = torch.nn.Parameter(torch.ones(2))

    def forward(self, batch: Batch) -> ArcScores:
        """Every candidate's score for every dependent of a batch.

        :param batch: sentences with their attention features.
        :returns: ``(B, W, W + 1)`` scores, candidate 0 being ROOT.
        """
        maps = batch.maps
        assert maps is not None  # the probe reads attention, so its batches carry it
        K = maps.shape[-1]
        w, u = self.theta[:K], self.theta[K:]
        # [j, i]: Σ_k w_k a_k[j, i] + u_k a_k[i, j]; the second sum is computed at [i, j] and transposed.
        words = maps @ w + (maps @ u).transpose(1, 2)
        root = torch.einsum("bjsc,s->bjc", batch.root, self.root_scale) @ self.theta  # (B, N)
        return torch.cat([root.unsqueeze(-1), words], -1)


#: Elements of a pair tensor (:class:`_PairWeighted`'s maps, :class:`_PairTanh`'s hidden layer) handled at a
#: time on the CPU: 4 MB, in the cache (an AVX2 EPYC's L3) and large enough that the per-chunk Python calls cost
#: little (1 MB chunks: 1.1x slower a Distances + words step).
_PAIR_CHUNK = 1 << 20


def _chunk_elements(t: torch.Tensor) -> int:
    """Elements of a pair tensor handled at a time on ``t``'s device: :data:`_PAIR_CHUNK` on the CPU; on any other
    device the whole batch. There no cache is to be kept to, every chunk is another round of kernel launches (a
    4 MB chunk is microseconds of a GPU's work), and a chunk's temporaries are never larger than the batch's own
    maps or hidden layer, which are on the device already."""
    return _PAIR_CHUNK if t.device.type == "cpu" else sys.maxsize


def _pair_chunks(B: int, N: int, rows: int) -> list[tuple[int, int, int, int]]:
    """(b0, b1, j0, j1) slices of (B, N) rows, about ``rows`` at a time: whole sentences, or parts of one."""
    if rows >= N:
        step = rows // N
        return [(b, min(B, b + step), 0, N) for b in range(0, B, step)]
    return [(b, b + 1, j, min(N, j + rows)) for b in range(B) for j in range(0, N, rows)]


class _PairWeighted(torch.autograd.Function):
    """``words[b, j, i] = Σ_k maps[b, j, i, k] (dep[b, j, k] + cand[b, i, k])
    + Σ_k maps[b, i, j, k] (cand[b, i, K + k] + dep[b, j, K + k])``, fused (maps: data, no gradient).

    Each weighted sum is one product and one sum over ``k``, in the cache-sized chunks of rows
    :func:`_pair_chunks` cuts (whole sentences, or parts of a long one), in one reused buffer.
    Through autograd the row-weighted half was a batched matrix-vector product (``torch.matmul``
    makes it a ``bmm`` with one column, four times slower on CPU than multiplying and summing) and
    the column half allocated two maps-sized temporaries each way.
    """

    @staticmethod
    def _chunks(maps: torch.Tensor) -> Iterator[tuple[int, int, int, int, torch.Tensor, torch.Tensor]]:
        """Each chunk's slices, its maps and a maps-shaped view of one reused buffer (a chunk is at least one row)."""
        B, N, _, K = maps.shape
        chunk = _chunk_elements(maps)
        buffer = maps.new_empty(min(maps.numel(), max(chunk, N * K)))
        for b0, b1, j0, j1 in _pair_chunks(B, N, max(1, chunk // (N * K))):
            m = maps[b0:b1, j0:j1]
            yield b0, b1, j0, j1, m, buffer[: m.numel()].view(m.shape)

    @staticmethod
    def forward(ctx: Any, maps: torch.Tensor, dep: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
        B, N, _, K = maps.shape
        words, back = maps.new_empty(B, N, N), maps.new_empty(B, N, N)
        for b0, b1, j0, j1, m, w in _PairWeighted._chunks(maps):
            # forward features a_k[j, i], weights dep[j] + cand[i]; backward ones a_k[i, j] built at [i, j]
            torch.add(dep[b0:b1, j0:j1, None, :K], cand[b0:b1, None, :, :K], out=w)
            torch.sum(w.mul_(m), -1, out=words[b0:b1, j0:j1])
            torch.add(cand[b0:b1, j0:j1, None, K:], dep[b0:b1, None, :, K:], out=w)
            torch.sum(w.mul_(m), -1, out=back[b0:b1, j0:j1])
        ctx.save_for_backward(maps)
        return words.add_(back.transpose(1, 2))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor, torch.Tensor]:
        (maps,) = ctx.saved_tensors
        B, N, _, K = maps.shape
        d_dep, d_cand = maps.new_zeros(B, N, 2 * K), maps.new_zeros(B, N, 2 * K)
        transposed = grad.transpose(1, 2)
        for b0, b1, j0, j1, m, w in _PairWeighted._chunks(maps):
            torch.mul(m, grad[b0:b1, j0:j1, :, None], out=w)
            d_dep[b0:b1, j0:j1, :K] += w.sum(2)
            d_cand[b0:b1, :, :K] += w.sum(1)
            torch.mul(m, transposed[b0:b1, j0:j1, :, None], out=w)
            d_cand[b0:b1, j0:j1, K:] += w.sum(2)
            d_dep[b0:b1, :, K:] += w.sum(1)
        return None, d_dep, d_cand


class AttentionWordsScorer(torch.nn.Module):
    """Scores of the attention-and-words probe (Table 3 "Attn + GloVe"): per-pair head weights ``W (v_j ⊕ v_i) + b``.

    :param n_features: 2K, two features (both directions) per head, K = L x H.
    :param dim: the word vectors' dimension.
    """

    def __init__(self, n_features: int, dim: int) -> None:
        super().__init__()
        self.dependent = torch.nn.Linear(dim, n_features)  # W's dependent half, and b
        self.candidate = torch.nn.Linear(dim, n_features, bias=False)  # W's candidate half
        for layer in (self.dependent, self.candidate):
            torch.nn.init.zeros_(layer.weight)
        torch.nn.init.zeros_(self.dependent.bias)
        self.root_scale = torch.nn.Parameter(torch.ones(2))

    def forward(self, batch: Batch) -> ArcScores:
        """Every candidate's score for every dependent of a batch.

        :param batch: sentences with their attention features and word vectors.
        :returns: ``(B, W, W + 1)`` scores, candidate 0 being ROOT.
        """
        dep = self.dependent(batch.vectors)  # (B, N, 2K): the weights' dependent part + bias
        cand = self.candidate(batch.vectors)  # (B, N, 2K): the weights' candidate part
        # Forward features a_k[j, i] = maps[j, i, k] and backward ones a_k[i, j], both weighted dep[j] + cand[i].
        words = _PairWeighted.apply(batch.maps, dep, cand)
        root_features = torch.einsum("bjsc,s->bjc", batch.root, self.root_scale)
        root = (root_features * dep).sum(-1)  # ROOT's vector is zero: its candidate part vanishes
        return torch.cat([root.unsqueeze(-1), words], -1)

    def weights(self, batch: Batch) -> torch.Tensor:
        """The head weights the probe gives every (dependent, candidate) pair.

        :param batch: sentences with their word vectors.
        :returns: ``(B, N, N + 1, 2K)`` weights, ROOT first.
        """
        dep = self.dependent(batch.vectors)
        cand = self.candidate(batch.vectors)
        cand = torch.cat([torch.zeros_like(cand[:, :1]), cand], 1)
        return dep[:, :, None, :] + cand[:, None, :, :]


#: Distance features of the words-and-distances baseline (Clark's, without the self indicator).
N_DISTANCE_FEATURES = 7


def distance_features(lengths: ItemValues, N: int) -> torch.Tensor:
    """The distance features of every (dependent j, candidate) pair, candidate 0 being ROOT.

    For a candidate word i of a sentence of n words: how far it is ahead ``(i - j) / n`` and behind
    ``(j - i) / n`` (zero on the other side), indicators for ``i = j + 1, j + 2, j - 1, j - 2``, and a
    ROOT indicator that is 1 only for ROOT (whose other features are 0). Clark et al.'s footnote 5:
    "indicator features for short distances as well as continuous distance features, with distance
    ahead/behind treated separately".

    :param lengths: ``(B,)`` words per sentence.
    :param N: the padded number of words.
    :returns: ``(B, N, N + 1, 7)`` features.
    """
    return _offset_features(lengths, N)[:, _offset_index(N, lengths.device)]


def _offset_features(lengths: torch.Tensor, N: int) -> torch.Tensor:
    """(B, 2N, 7): the features of :func:`distance_features` once per offset (they depend on nothing else).

    Row 0 is ROOT; row ``1 + (i - j) + N - 1`` is the offset ``i - j`` of a word candidate. On ``lengths``' device.
    """
    n = lengths.to(torch.float32).clamp(min=1)[:, None]
    delta = torch.arange(-(N - 1), N, dtype=torch.float32, device=lengths.device)[None, :].expand(len(lengths), -1)
    words = torch.stack(
        [
            delta.clamp(min=0) / n,
            (-delta).clamp(min=0) / n,
            (delta == 1).float(),
            (delta == 2).float(),
            (delta == -1).float(),
            (delta == -2).float(),
            torch.zeros_like(delta),
        ],
        -1,
    )
    root = torch.zeros(len(lengths), 1, N_DISTANCE_FEATURES, device=lengths.device)
    root[..., -1] = 1.0
    return torch.cat([root, words], 1)


def _offset_index(N: int, device: torch.device | None = None) -> torch.Tensor:
    """(N, N + 1): the row of :func:`_offset_features` of each (dependent j, candidate), ROOT first, on ``device``."""
    positions = torch.arange(N, device=device)
    return torch.cat(
        [torch.zeros(N, 1, dtype=torch.long, device=device), positions[None, :] - positions[:, None] + N], 1
    )


class _PairTanh(torch.autograd.Function):
    """``scores[b, j, c] = o · tanh(dep[b, j] + cand[b, c] + table[b, row(j, c)])``, fused.

    ``row`` is :func:`_offset_index`'s: 0 for ROOT (c = 0), ``N + i - j`` for the word candidate
    ``c = i + 1``. The hidden layer has ``B x N x (N + 1) x hidden`` values, far more than the
    cache; computed by autograd op by op it went through memory some fifteen times per step. Here
    it is built and used chunk by chunk in place, and only its sigmoid is kept for the backward pass.

    Two identities keep the passes over it to three each way. ``tanh(x) = 2 sigmoid(2x) - 1``
    (torch's CPU tanh is several times slower than its sigmoid): the doubling is applied to the
    three small inputs, and the ``2 s - 1`` and the ``o`` of the derivative ``4 o s (1 - s)`` to the
    sums. And the rows are built in reverse order of the dependent, ``j' = N - 1 - j``: word
    candidate ``i`` then reads ``table`` row ``i + j' + 1``, so a chunk's rows are one strided view
    of ``table`` (a Hankel matrix of its rows) added to the candidates in one pass, where a gather
    by row index was the slowest step.
    """

    @staticmethod
    def forward(ctx: Any, dep: torch.Tensor, cand: torch.Tensor, table: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        B, N, H = dep.shape
        M = N + 1
        dep2, cand2, table2 = (2 * t.contiguous() for t in (dep.flip(1), cand, table))  # dep2: j' order
        scores = dep.new_empty(B, N, M)
        hidden = dep.new_empty(B, N, M, H)
        batch_stride = table2.stride(0)
        for b0, b1, j0, j1 in _pair_chunks(B, N, max(1, _chunk_elements(hidden) // (M * H))):
            h = hidden[b0:b1, j0:j1]
            words = table2.as_strided(
                (b1 - b0, j1 - j0, N, H), (batch_stride, H, H, 1), b0 * batch_stride + (1 + j0) * H
            )
            torch.add(words, cand2[b0:b1, None, 1:], out=h[:, :, 1:])
            h[:, :, 0] = (table2[b0:b1, 0] + cand2[b0:b1, 0])[:, None]  # ROOT: row 0
            h.add_(dep2[b0:b1, j0:j1, None])
            torch.sigmoid(h, out=h)
            torch.mv(h.view(-1, H), o, out=scores[b0:b1, j0:j1].view(-1))  # matmul would take a slow bmm
        ctx.save_for_backward(hidden, o)
        ctx.table_shape, ctx.spent = table.shape, False
        return scores.flip(1).mul_(2).sub_(o.sum())

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        if ctx.spent:  # retain_graph=True and a second backward pass
            raise RuntimeError("the Distances + words scorer's backward pass runs once: it overwrites what it saved")
        ctx.spent = True
        hidden, o = ctx.saved_tensors
        B, N, M, H = hidden.shape
        d_dep, d_cand = hidden.new_zeros(B, N, H), hidden.new_zeros(B, M, H)
        d_table, d_o = hidden.new_zeros(ctx.table_shape), torch.zeros_like(o)
        flat = d_table.view(-1, H)
        rows = _offset_index(N, hidden.device).flip(0)[None]
        rows = rows + (torch.arange(B, device=hidden.device) * ctx.table_shape[1])[:, None, None]
        grad = grad.flip(1).contiguous()  # j' order, as the hidden rows
        for b0, b1, j0, j1 in _pair_chunks(B, N, max(1, _chunk_elements(hidden) // (M * H))):
            s, g = hidden[b0:b1, j0:j1], grad[b0:b1, j0:j1]
            d_o.addmv_(s.reshape(-1, H).T, g.reshape(-1))
            # From here on s holds s (1 - s) g: d score / d hidden, less its factor 4 o (applied to the sums).
            s.addcmul_(s, s, value=-1).mul_(g[..., None])
            d_dep[b0:b1, j0:j1] += s.sum(2)
            d_cand[b0:b1] += s.sum(1)
            flat.index_add_(0, rows[b0:b1, j0:j1].reshape(-1), s.reshape(-1, H))
        factor = 4 * o
        return d_dep.flip(1).mul_(factor), d_cand.mul_(factor), d_table.mul_(factor), d_o.mul_(2).sub_(grad.sum())


class DistanceWordsScorer(torch.nn.Module):
    """Scores of the "Distances + GloVe" baseline: one hidden layer over ``v_j ⊕ v_i ⊕ distance features``.

    ROOT's vector is zero.

    :param dim: the word vectors' dimension.
    :param hidden: the hidden layer's size.
    """

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.dependent = torch.nn.Linear(dim, hidden)
        self.candidate = torch.nn.Linear(dim, hidden, bias=False)
        self.distance = torch.nn.Linear(N_DISTANCE_FEATURES, hidden, bias=False)
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, batch: Batch) -> ArcScores:
        """Every candidate's score for every dependent of a batch.

        :param batch: sentences with their word vectors.
        :returns: ``(B, W, W + 1)`` scores, candidate 0 being ROOT.
        """
        B, N = batch.heads.shape
        cand = self.candidate(batch.vectors)
        cand = torch.cat([torch.zeros_like(cand[:, :1]), cand], 1)  # ROOT first
        # The distance features depend only on the offset (and the length): one row of hidden units per offset.
        table = self.distance(_offset_features(batch.lengths, N))
        scores = _PairTanh.apply(self.dependent(batch.vectors), cand, table, self.out.weight[0])
        return scores + self.out.bias
