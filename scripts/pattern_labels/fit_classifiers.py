"""Fit the shipped pattern-type classifiers on labels.csv (kept as run): python scripts/pattern_labels/fit_classifiers.py

Writes models/ (features.json, cnn.safetensors + cnn.json, best.json with the cross-validation) and prints
the cross-validated scores. Four folds: the rarest type, block, has four labelled maps.
"""

from bertology_utils.analyses.pattern_models import MODELS_DIR, fit_classifiers
from bertology_utils.analyses.pattern_types import load_labelled_maps

table, maps = load_labelled_maps()
print(fit_classifiers([maps[m] for m in table["map_id"]], table["label"], MODELS_DIR, folds=4).round(3).to_string())
