"""Between-person agreement and the classifiers against the independent annotator (kept as run).

python scripts/pattern_labels/agreement.py

Annotator C (pass_c.csv) labelled the 455 maps blind to passes A and B and to the classifiers, from the
same pictures and GUIDE.md. The classifiers are scored by their cross-validated out-of-fold predictions
(fitted on the final labels only), so no map is scored by a model that saw its label.
"""

import pandas as pd
from sklearn.metrics import f1_score, recall_score

from bertology_utils.analyses.pattern_cnn import CNNClassifier
from bertology_utils.analyses.pattern_models import FeatureClassifier, cross_validate
from bertology_utils.analyses.pattern_types import TYPES, load_labelled_maps
from bertology_utils.present.labelling import LabelFile, agreement

here = "data/pattern_labels"
table, maps = load_labelled_maps(here)
c = LabelFile(f"{here}/pass_c.csv", "C").labels()
for name, column in (("pass A", "label_a"), ("pass B", "label_b"), ("final", "label")):
    g = agreement(c, dict(zip(table["map_id"], table[column])))
    print(f"C vs {name}: {g.n} maps, {g.observed:.3f} agree, kappa {g.kappa:.3f}")


def scores(reference, predicted):
    no_block = [t for t in TYPES if t != "block"]
    return {
        "macro F1": f1_score(reference, predicted, average="macro", labels=list(TYPES), zero_division=0),
        "macro F1 without block": f1_score(reference, predicted, average="macro", labels=no_block, zero_division=0),
        "vertical recall": recall_score(reference, predicted, labels=["vertical"], average="macro", zero_division=0),
    }


ids = list(table["map_id"])
shared = [i for i, m in enumerate(ids) if c.get(m) in TYPES]
final = [table["label"][i] for i in shared]
by_c = [c[ids[i]] for i in shared]
# the maps no annotator disputes: passes A and B and annotator C gave the same type
undisputed = [i for i in shared if table["label_a"][i] == table["label_b"][i] == c[ids[i]]]
rows = {"annotator C, scored against the final labels": scores(final, by_c)}
on_undisputed = {}
for estimator in (FeatureClassifier(), CNNClassifier()):
    cv = cross_validate(estimator, [maps[m] for m in ids], table["label"], folds=4)
    predicted = [cv.predicted[i] for i in shared]
    rows[f"{cv.method} (out of fold), against the final labels"] = scores(final, predicted)
    rows[f"{cv.method} (out of fold), against annotator C"] = scores(by_c, predicted)
    on_undisputed[cv.method] = scores([table["label"][i] for i in undisputed], [cv.predicted[i] for i in undisputed])
print(f"on the {len(shared)} maps annotator C gave a type:")
print(pd.DataFrame(rows).T.round(3).to_string())
counts = pd.Series([table["label"][i] for i in undisputed]).value_counts().to_dict()
print(f"\non the {len(undisputed)} maps passes A, B and annotator C all gave the same type ({counts}):")
print(pd.DataFrame(on_undisputed).T.round(3).to_string())
