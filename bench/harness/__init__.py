"""kafkalite's benchmark harness (issue 7): ``python -m bench all``.

Modules: ``brokers`` starts and measures the brokers under test, ``client``
builds and runs the C load client (``bench/loadgen``) or the confluent-kafka
fallback, ``workloads`` holds the six workloads, ``report`` prints the tables
and writes ``docs/performance.md``.
"""
