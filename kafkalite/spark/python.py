"""``kafkalite-spark-python``: a Python executable for Spark's Python processes
(``spark.pyspark.python`` / ``PYSPARK_PYTHON``) that imports the installed, byte-compiled
PySpark instead of ``pyspark.zip``.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python process's
``PYTHONPATH``, and Python never caches bytecode for modules imported from a zip, so each new
process compiles the PySpark modules it imports from source. Most Python workers are forked
from a daemon that pays this once, but every streaming query starts a Python source runner
of its own: about 0.6 s of each query's start-up on a loaded 2-core machine (docs/spark.md).

With a pip-installed PySpark, the zip is part of the installed package (``.../pyspark/python/
lib/pyspark.zip`` inside ``.../pyspark``), so the installed modules are the same code; this
drops the zip only then, and only when that package's directory is on this interpreter's
own path, then runs this interpreter with the arguments given. Any other ``pyspark.zip`` (a
Spark distribution's) stays.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main", "python_path"]


def python_path(value: str, sys_path: list[str]) -> str:
    """``PYTHONPATH`` without a ``pyspark.zip`` that belongs to a PySpark package installed in
    one of ``sys_path``'s directories."""
    kept = []
    for entry in value.split(os.pathsep):
        if os.path.basename(entry) == "pyspark.zip":
            pkg = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(entry))))
            if (
                os.path.basename(pkg) == "pyspark"
                and os.path.isfile(os.path.join(pkg, "__init__.py"))
                and os.path.dirname(pkg) in sys_path
            ):
                continue
        kept.append(entry)
    return os.pathsep.join(kept)


def main() -> None:
    env = dict(os.environ)
    if "PYTHONPATH" in env:
        env["PYTHONPATH"] = python_path(env["PYTHONPATH"], sys.path)
    os.execve(sys.executable, [sys.executable, *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
