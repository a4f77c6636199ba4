"""The benchmark suite: ``python -m course_tools.bench [--suite crossover|decode|engine|gated|all] [--quick]``.

Four suites, each a module: ``crossover`` (time and peak memory of softmax and linear
attention against N, and where they cross), ``decode`` (per-token latency and bytes held
while generating), ``engine`` (the causal call's time outside its matmuls, decay's
scaling, the cost of backward) and ``gated`` (the gated ledger's chunked forms against their
recurrences, their backward, fla's pure-torch references). ``targets`` is the table of PASS/FAIL
targets the numbers are judged by, ``report`` prints the tables, ``plots`` writes the PNGs next to
the JSON (``course_lib.records`` writes that).
"""
