"""The recall study's command, ``python -m course_tools.recall``: every ``TinyLM`` mixer trained on Zoology's
MQAR under a protocol the code enforces (``study``, ``verdict``) and as a byte-level language model
(``language``); ``report`` and ``figures`` turn the results into the tables and plots of notebook 12."""
