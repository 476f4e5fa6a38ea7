"""--precision is --dtype, and both read a recipe as its sources spell it (issue 20: fp8-delayed, FP8-CS, MXFP8)."""
import subprocess
import sys

import pytest

from roofline.face.cli import parser


@pytest.mark.parametrize("spelling, name", [("fp8-delayed", "fp8"), ("FP8-CS", "fp8-cs"), ("MXFP8", "mxfp8"),
                                            ("nvfp4", "nvfp4"), ("bf16", "bf16")])
def test_precision_alias_reads_the_recipes_spellings(spelling, name):
    args = parser("transformer").parse_args(["transformer", "--model", "llama3-8b", "--precision", spelling])
    assert args.dtype == name
    assert parser("transformer").parse_args(["transformer", "--model", "llama3-8b", "--dtype", spelling]).dtype == name


def test_unknown_precision_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, "-m", "roofline", "transformer", "--model", "llama3-8b", "--precision", "int4"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "'int4'" in r.stderr and "nvfp4" in r.stderr
