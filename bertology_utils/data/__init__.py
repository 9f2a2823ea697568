"""Text, treebanks (CoNLL-U), GLUE tasks and GAP as immutable items of words.

Three layers:

* item types (:class:`Sentence`, :class:`SentencePair`, :class:`GapExample`) held in a
  :class:`Corpus`, which records where its data came from (``name``, ``path``, ``sha256``,
  ``description``);
* readers (:func:`read_conllu`, :func:`read_glue_tsv`, :func:`read_gap_tsv`,
  :func:`read_pairs_tsv`) that validate a file and raise :class:`DataFormatError` naming the
  file and line;
* resolution (:data:`DATASETS`, :func:`resolve_data_file`) and loaders (:func:`load_dataset`
  and friends); :func:`resolve_corpus`, :func:`treebank_splits` and :func:`resolve_task` turn a
  notebook's data parameter (a registered name, the user's own file or folder, or a Hugging Face
  data set: ``hf:FOLDER`` written by ``save_to_disk``, or ``hf:glue/sst2`` on the Hub, with options
  such as ``?split=test&text=review``) into data. Every data set is looked for in the same order: an explicit path,
  ``$BERTOLOGY_DATA_DIR``, the project's ``data/`` folder, the cache, then a download into the
  cache (checked against the registry's sha256) unless offline.

Raw text is split into words by :func:`words_of`, the one rule used everywhere, and a word is
punctuation by :func:`is_punctuation` (a treebank's own tags through
:func:`punctuation_forms`, else Unicode's categories). :func:`consecutive_pairs` and :func:`treebank_splits`
derive the corpora the analyses share (sentence pairs; train/dev/test).
"""

from bertology_utils.data._items import (
    Corpus,
    GapExample,
    Sentence,
    SentencePair,
    consecutive_pairs,
    is_punctuation,
    punctuation_forms,
    words_of,
)
from bertology_utils.data._readers import (
    GLUE_TASKS,
    file_sha256,
    glue_task_name,
    read_classification_tsv,
    read_conllu,
    read_gap_tsv,
    read_glue_tsv,
    read_pairs_tsv,
    read_text_lines,
)
from bertology_utils.data._resolve import KINDS, TREEBANK_SPLITS, Task, resolve_corpus, resolve_task, treebank_splits
from bertology_utils.data._sources import (
    DATASETS,
    DataFile,
    DatasetSpec,
    DataVersionWarning,
    available_datasets,
    default_treebank,
    load_dataset,
    load_gap,
    load_glue,
    load_sample,
    load_sample_pairs,
    load_treebank,
    resolve_data_file,
)

__all__ = [
    "Sentence",
    "SentencePair",
    "GapExample",
    "Corpus",
    "consecutive_pairs",
    "words_of",
    "is_punctuation",
    "punctuation_forms",
    "read_text_lines",
    "read_conllu",
    "read_glue_tsv",
    "read_gap_tsv",
    "read_pairs_tsv",
    "read_classification_tsv",
    "DataFile",
    "DatasetSpec",
    "DATASETS",
    "GLUE_TASKS",
    "glue_task_name",
    "DataVersionWarning",
    "file_sha256",
    "resolve_data_file",
    "available_datasets",
    "load_dataset",
    "load_treebank",
    "load_glue",
    "load_gap",
    "load_sample",
    "load_sample_pairs",
    "default_treebank",
    "KINDS",
    "TREEBANK_SPLITS",
    "Task",
    "resolve_corpus",
    "resolve_task",
    "treebank_splits",
]
