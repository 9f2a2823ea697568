"""Notebook 04 (notebooks/04_probes.ipynb): attention-based probe classifiers of dependency heads (Table 3)."""

from bertology_utils.papers.metrics.base import Kind, Metric

METRICS = (
    # what was run on what
    Metric("probes.model", Kind.EXACT, "model name", "the model the notebook loaded"),
    Metric("probes.data", Kind.TEXT, "description", "which treebank splits were read, and from where"),
    Metric("probes.word_vectors", Kind.EXACT, "description", "the word vectors the '+ words' probes read"),
    Metric(
        "probes.word_vectors_unknown_rate",
        Kind.EXACT,
        "share of word lookups",
        "share of the word lookups that found no vector (a zero vector was used)",
    ),
    Metric("probes.{split}_sentences", Kind.EXACT, "count", "sentences of the split (train, dev or test)"),
    Metric("probes.test_scored_words", Kind.EXACT, "count", "test words scored (punctuation left out)"),
    # each row of Table 3 (Right-branching, Distances + words, Random-init Attn + words, Attn, Attn + words)
    Metric(
        "probes.{row}.test_uas",
        Kind.TRAINED,
        "accuracy",
        "test UAS of the fitted probe: share of scored words whose predicted head is the gold head",
        items="probes.test_scored_words",
    ),
    Metric(
        "probes.{row}.dev_uas",
        Kind.TRAINED,
        "accuracy",
        "dev UAS of the fitted probe (the split its early stopping read)",
    ),
    Metric(
        "probes.right_branching.test_uas",
        Kind.EXACT,
        "accuracy",
        "test UAS of the right-branching baseline (each word's head is the next word; no fitting)",
    ),
    Metric(
        "probes.right_branching.dev_uas",
        Kind.EXACT,
        "accuracy",
        "dev UAS of the right-branching baseline (each word's head is the next word; no fitting)",
    ),
    Metric("probes.{row}.paper_uas", Kind.EXACT, "accuracy", "the row's UAS in Clark et al.'s Table 3"),
    Metric("probes.{row}.best_epoch", Kind.TRAINED, "epoch (from 1)", "the epoch with the best dev UAS (kept)"),
    Metric("probes.{row}.fit_seconds", Kind.TIMING, "seconds", "time taken to fit the probe (its first fit if cached)"),
    # the Attn probe's weights
    Metric(
        "probes.attn.root_scale_{token}",
        Kind.TRAINED,
        "weight",
        "the Attn probe's fitted scale of the attention to this special token ([CLS], [SEP]) as the ROOT score",
    ),
    Metric(
        "probes.attn.weight_accuracy_spearman_{direction}",
        Kind.TRAINED,
        "Spearman rho",
        "rank correlation over heads of the Attn probe's weight with the head's single-head accuracy, per direction",
    ),
    # Hewitt and Manning's structural probes on each layer's hidden states (punctuation left out)
    Metric(
        "probes.structural.distance.layer_{layer}.{split}_uuas",
        Kind.TRAINED,
        "accuracy",
        "UUAS of the distance probe: share of the gold tree's edges in the spanning tree of the predicted distances",
    ),
    Metric(
        "probes.structural.distance.layer_{layer}.{split}_dspr",
        Kind.TRAINED,
        "Spearman rho",
        "DSpr of the distance probe: predicted against gold distances, per word, averaged over sentence lengths 5-50",
    ),
    Metric(
        "probes.structural.depth.layer_{layer}.{split}_root_acc",
        Kind.TRAINED,
        "accuracy",
        "root% of the depth probe: share of sentences whose shallowest predicted word is the gold root",
    ),
    Metric(
        "probes.structural.depth.layer_{layer}.{split}_nspr",
        Kind.TRAINED,
        "Spearman rho",
        "NSpr of the depth probe: predicted against gold depths per sentence, averaged over lengths 5-50",
    ),
    Metric(
        "probes.structural.{probe}.layer_{layer}.best_epoch",
        Kind.TRAINED,
        "epoch (from 1)",
        "the structural probe's epoch with the lowest dev loss (kept)",
    ),
    Metric(
        "probes.structural.{probe}.layer_{layer}.rank_{rank}.{quantity}",
        Kind.TRAINED,
        "as the full-rank key's",
        "the rank sweep: the same metric as the full-rank key (without rank_), for the probe fitted at this rank",
    ),
    # claims: Table 3's comparisons, as margins in UAS points
    Metric(
        "probes.claims.table3.{claim}.test_margin",
        Kind.TRAINED,
        "percent UAS points",
        "test UAS of the row the claim says is better minus the other row's",
    ),
    # claims: Hewitt and Manning's layer curve, and the hidden states against the attention maps (UUAS points)
    Metric(
        "probes.claims.structural.{claim}.best_layer",
        Kind.TRAINED,
        "layer (0: embeddings)",
        "the hidden-state layer whose full-rank distance probe has the highest test UUAS",
    ),
    Metric(
        "probes.claims.structural.peak_in_middle.best_uuas",
        Kind.TRAINED,
        "percent UUAS",
        "the highest test UUAS of a layer's full-rank distance probe",
    ),
    Metric(
        "probes.claims.structural.peak_in_middle.middle_minus_others",
        Kind.TRAINED,
        "percent UUAS points",
        "the best test UUAS among the middle half of the layers minus the best among the others",
    ),
    Metric(
        "probes.claims.structural.vectors_beat_maps.maps_uuas",
        Kind.TRAINED,
        "percent UUAS",
        "the attention probe's predicted heads as undirected edges: test UUAS on the sentences both probes scored",
    ),
    Metric(
        "probes.claims.structural.vectors_beat_maps.layer_{layer}_minus_maps",
        Kind.TRAINED,
        "percent UUAS points",
        "the layer's full-rank distance probe's test UUAS minus the attention probe's, on the same sentences",
    ),
    Metric(
        "probes.claims.table3.{claim}.dev_margin",
        Kind.TRAINED,
        "percent UAS points",
        "dev UAS of the row the claim says is better minus the other row's",
    ),
)
