"""The recall study's command, ``python -m course_tools.recall``: every ``TinyLM`` mixer trained on MQAR
(``course_lib.recall.sweep``) and as a byte-level language model (``language``); it writes the
committed ``course_lib/results/recall_<device>.json`` that notebook 12 reads."""
