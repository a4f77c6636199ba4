"""The benchmark suite: ``python -m course_lib.bench [--suite crossover|decode|all] [--quick]``.

Two suites, each a module: ``crossover`` (time and peak memory of softmax and linear
attention against N, and where they cross) and ``decode`` (per-token latency and bytes
held while generating). ``targets`` turns the numbers into PASS/FAIL verdicts, ``report``
prints ratio tables and writes the JSON, ``plots`` the PNGs next to it.
"""
