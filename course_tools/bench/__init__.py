"""The benchmark suite: ``python -m course_tools.bench [--suite crossover|decode|engine|all] [--quick]``.

Three suites, each a module: ``crossover`` (time and peak memory of softmax and linear
attention against N, and where they cross), ``decode`` (per-token latency and bytes held
while generating) and ``engine`` (the causal call's time outside its matmuls, decay's
scaling, the cost of backward). ``targets`` turns the numbers into PASS/FAIL verdicts,
``report`` prints ratio tables and writes the JSON, ``plots`` the PNGs next to it.
"""
