"""Notebook 03 (notebooks/03_syntax_coref.ipynb): single heads as dependency parsers and coreference resolvers."""

from bertology_utils.papers.metrics.base import Kind, Metric

METRICS = (
    # syntax: what was scored
    Metric("syntax.model", Kind.EXACT, "model name", "the model the notebook loaded"),
    Metric("syntax.treebank", Kind.EXACT, "corpus name", "the treebank (and slice of it) scored"),
    Metric("syntax.sentences", Kind.EXACT, "count", "sentences scored"),
    Metric("syntax.dependents", Kind.EXACT, "count", "dependents scored, every relation together"),
    Metric("syntax.excluded_root", Kind.EXACT, "count", "root words left out (they have no head word)"),
    Metric("syntax.excluded_punct", Kind.EXACT, "count", "punctuation dependents left out"),
    Metric("syntax.skipped_sentences", Kind.EXACT, "count", "sentences left out (too long for the model...)"),
    # syntax: the best head of each relation (UD label, ':' written '_'; "all": every relation)
    Metric("syntax.{relation}.count", Kind.EXACT, "count", "scored dependents of the relation"),
    Metric(
        "syntax.{relation}.best_head",
        Kind.MAXIMUM,
        "head (layer-head, from 1)",
        "the head whose most-attended word is most often the gold head (or dependent) of the relation",
    ),
    Metric(
        "syntax.{relation}.direction",
        Kind.MAXIMUM,
        "direction",
        "the direction (dep->head or head->dep) in which the best head is most accurate",
    ),
    Metric(
        "syntax.{relation}.best_accuracy",
        Kind.MAXIMUM,
        "accuracy",
        "share of the relation's dependents whose gold head is the best head's most-attended word",
        items="syntax.{relation}.count",
    ),
    Metric(
        "syntax.{relation}.held_out_accuracy",
        Kind.MAXIMUM,
        "accuracy",
        "accuracy of a head chosen on one half of the sentences, scored on the other, both ways pooled",
        items="syntax.{relation}.count",
    ),
    Metric(
        "syntax.{relation}.baseline_offset",
        Kind.EXACT,
        "word offset",
        "the fixed relative position that is most often the gold head (the baseline)",
    ),
    Metric(
        "syntax.{relation}.baseline_accuracy",
        Kind.EXACT,
        "accuracy",
        "share of the relation's dependents whose gold head sits at the best fixed offset",
    ),
    Metric(
        "syntax.head.{relation}",
        Kind.MAXIMUM,
        "accuracy",
        "per head (layers x heads), its accuracy on the relation in its better direction",
        items="syntax.{relation}.count",
    ),
    Metric(
        "syntax.head.best_relation",
        Kind.MAXIMUM,
        "relation",
        "per head (layers x heads), the relation (other than all) it is most accurate on",
    ),
    Metric(
        "syntax.head.best_relation_accuracy",
        Kind.MAXIMUM,
        "accuracy",
        "per head (layers x heads), its accuracy on the relation it is most accurate on",
    ),
    # syntax claims: rows of the paper's Table 1 (Stanford labels)
    Metric(
        "syntax.claims.table1.{relation}.held_out_accuracy",
        Kind.MAXIMUM,
        "accuracy",
        "held-out accuracy of the best head for the UD twin of the paper's relation",
        items="syntax.claims.table1.{relation}.dependents",
    ),
    Metric(
        "syntax.claims.table1.{relation}.dependents",
        Kind.EXACT,
        "count",
        "dependents of the UD twin of the paper's relation (0: not testable here)",
    ),
    Metric(
        "syntax.claims.table1.{relation}.baseline_accuracy",
        Kind.EXACT,
        "accuracy",
        "accuracy of the best fixed offset for the UD twin of the paper's relation",
    ),
    # coreference on GAP
    Metric("coref.examples", Kind.EXACT, "count", "GAP examples scored"),
    Metric("coref.windowed", Kind.EXACT, "count", "GAP passages cut to a window to fit the model"),
    Metric("coref.excluded", Kind.EXACT, "count", "GAP examples left out, every reason together"),
    Metric(
        "coref.best_head",
        Kind.MAXIMUM,
        "head (layer-head, from 1)",
        "the head whose attention from the pronoun most often favours the correct name",
    ),
    Metric(
        "coref.best_accuracy",
        Kind.MAXIMUM,
        "accuracy",
        "the best head's accuracy over the examples",
        items="coref.examples",
    ),
    Metric(
        "coref.held_out_accuracy",
        Kind.MAXIMUM,
        "accuracy",
        "accuracy of a head chosen on the other half of the examples (even / odd)",
        items="coref.examples",
    ),
    Metric(
        "coref.best_accuracy_masculine",
        Kind.MAXIMUM,
        "accuracy",
        "the best head's accuracy on the examples with a masculine pronoun",
    ),
    Metric(
        "coref.best_accuracy_feminine",
        Kind.MAXIMUM,
        "accuracy",
        "the best head's accuracy on the examples with a feminine pronoun",
    ),
    Metric(
        "coref.bias_fm",
        Kind.MAXIMUM,
        "ratio",
        "the best head's accuracy on feminine pronouns over masculine (GAP's bias ratio)",
    ),
    Metric("coref.nearest_accuracy", Kind.EXACT, "accuracy", "accuracy of picking the name nearest the pronoun"),
    Metric("coref.first_accuracy", Kind.EXACT, "accuracy", "accuracy of picking the name that comes first"),
    Metric(
        "coref.salience_accuracy",
        Kind.EXACT,
        "accuracy",
        "accuracy of the salience rule (a name before the pronoun, then the nearer sentence)",
    ),
    Metric(
        "coref.head.accuracy",
        Kind.MAXIMUM,
        "accuracy",
        "per head (layers x heads), its accuracy over the examples",
        items="coref.examples",
    ),
    # coreference claims (Table 2), in percent
    Metric(
        "coref.claims.{claim}.held_out_accuracy",
        Kind.MAXIMUM,
        "percent accuracy",
        "held-out accuracy of the best coreference head",
        items="coref.examples",
    ),
    Metric(
        "coref.claims.coref_beats_nearest.nearest_accuracy",
        Kind.EXACT,
        "percent accuracy",
        "accuracy of picking the name nearest the pronoun",
    ),
    Metric(
        "coref.claims.coref_below_rule_based.rule_accuracy",
        Kind.EXACT,
        "percent accuracy",
        "accuracy of the salience rule",
    ),
)
