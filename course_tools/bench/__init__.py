"""The benchmark suite: ``python -m course_tools.bench [--suite crossover|decode|engine|all] [--quick]``.

Three suites, each a module: ``crossover`` (time and peak memory of softmax and linear
attention against N, and where they cross), ``decode`` (per-token latency and bytes held
while generating) and ``engine`` (the causal call's time outside its matmuls, decay's
scaling, the cost of backward). ``targets`` is the table of PASS/FAIL targets the numbers are
judged by, ``report`` prints the tables, ``plots`` writes the PNGs next to the JSON
(``course_lib.records`` writes that).
"""
