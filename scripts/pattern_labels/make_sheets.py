"""Draw 175 random (item, layer, head) maps from the default model over 4 data sets; render contact sheets."""

import json

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bertology_utils.attention import attention_for
from bertology_utils.core import load_model
from bertology_utils.data import consecutive_pairs, default_treebank, load_glue

model = load_model(None)
rng = np.random.default_rng(20191103)
tb = default_treebank("dev")
sets = {
    "treebank": tb[:200],
    "treebank-pairs": consecutive_pairs(tb[:400]),
    "mrpc": load_glue("MRPC", "dev")[:200],
    "rte": load_glue("RTE", "dev")[:200],
}
L, H = model.num_layers, model.num_heads
rows = []
per = [44, 44, 44, 43]
for (name, corpus), k in zip(sets.items(), per):
    # choose items with at most 40 words so the pictures stay legible
    idx = rng.choice(len(corpus), size=k, replace=True)
    items = attention_for([corpus[int(i)] for i in idx], model, too_long="skip")
    for it in items:
        l, h = int(rng.integers(L)), int(rng.integers(H))
        rows.append(
            dict(
                dataset=name,
                item_id=it.item_id,
                layer=l + 1,
                head=h + 1,
                map=it.attention[l, h].astype(np.float32),
                kinds=it.word_kinds,
                segments=it.segments,
                words=it.words,
            )
        )
order = rng.permutation(len(rows))
rows = [rows[i] for i in order]
for i, r in enumerate(rows):
    r["map_id"] = f"m{i:03d}"
np.savez_compressed("/tmp/pl/maps.npz", **{r["map_id"]: r["map"] for r in rows})
meta = [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items() if k != "map"} for r in rows]
json.dump(meta, open("/tmp/pl/meta.json", "w"))
for s in range(0, len(rows), 25):
    fig, axes = plt.subplots(5, 5, figsize=(12, 12.5))
    for ax, r in zip(axes.ravel(), rows[s : s + 25]):
        ax.imshow(r["map"], cmap="Blues", vmin=0, vmax=r["map"].max(), interpolation="nearest")
        ax.set_title(r["map_id"], fontsize=11)
        ax.set_xticks([])
        ax.set_yticks([])
        n = len(r["words"])
        seg = np.asarray(r["segments"])
    for ax in axes.ravel()[len(rows[s : s + 25]) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(f"/tmp/pl/sheet_{s // 25}.png", dpi=60)
    plt.close(fig)
print(len(rows), "maps", model.name, L, H)
