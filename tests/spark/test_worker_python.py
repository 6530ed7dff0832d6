"""kafkalite-spark-python: which ``pyspark.zip`` it drops from ``PYTHONPATH``, and that Spark's
Python processes started through it import the installed PySpark (the shared session's
workers run on it: tests/spark/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

import kafkalite.spark
from kafkalite.spark.python import python_path

PKG = Path(pyspark.__file__).resolve().parent
ZIP = str(PKG / "python" / "lib" / "pyspark.zip")
PY4J = str(PKG / "python" / "lib" / "py4j-0.10.9.9-src.zip")


def test_drops_only_the_zip_of_an_installed_pyspark(tmp_path: Path) -> None:
    site = str(PKG.parent)
    value = os.pathsep.join([ZIP, PY4J, "/elsewhere"])
    assert python_path(value, [site]) == os.pathsep.join([PY4J, "/elsewhere"])
    # the installed package is not on the interpreter's path: keep the zip
    assert python_path(value, ["/other/site-packages"]) == value
    # a Spark distribution's zip (no package around it) stays
    dist = tmp_path / "spark" / "python" / "lib"
    dist.mkdir(parents=True)
    other = str(dist / "pyspark.zip")
    assert python_path(other, [str(tmp_path)]) == other


def test_runs_this_interpreter_on_the_installed_pyspark() -> None:
    exe = kafkalite.spark.worker_python()
    assert exe != sys.executable, "kafkalite-spark-python is installed with the package"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ZIP, PY4J]))
    out = subprocess.run(
        [
            exe,
            "-c",
            "import os, sys, pyspark; print(sys.executable, pyspark.__file__,"
            " os.environ['PYTHONPATH'])",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert os.path.realpath(out[0]) == os.path.realpath(sys.executable)
    assert out[1:] == [str(PKG / "__init__.py"), PY4J]
