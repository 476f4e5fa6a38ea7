"""benchmarks/layer_ops.py: the operator table of one validation row's layer adds up to what validate prices for that
layer (the compiled model's t_layer_fwd / t_layer_bwd), for an MoE row and a dense one."""
import importlib.util
from pathlib import Path

import pytest

from roofline.views import validate as V

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "layer_ops.py"
spec = importlib.util.spec_from_file_location("layer_ops", SCRIPT)
L = importlib.util.module_from_spec(spec)
spec.loader.exec_module(L)


@pytest.mark.parametrize("case_id", ["nemo2606_h100_qwen3_30b_a3b_fp8cs_16gpu", "nemo2604_h100_llama3_70b_fp8cs_64gpu"])
def test_operator_times_add_up_to_the_layer_validate_prices(case_id):
    rows = {r["case_id"]: r for r in V.read(V.dataset_path("nemo"))}
    case = V.build_case(rows[case_id])
    out = V.evaluate_cases([case])
    ops = L.layer_ops(case)
    assert len(ops) >= 10 and all(o["fwd_s"] >= 0 and o["bwd_s"] >= 0 for o in ops)
    assert sum(o["fwd_s"] for o in ops) == pytest.approx(float(out["t_layer_fwd"][0]), rel=1e-9)
    assert sum(o["bwd_s"] for o in ops) == pytest.approx(float(out["t_layer_bwd"][0]), rel=1e-9)
    names = {o["name"] for o in ops}
    assert {"qkv_proj", "flash_attention", "mlp_up", "mlp_down"} <= names
    assert ("moe_permute" in names) == ((case.model.n_experts or 1) > 1)
    # GEMMs sit on the compute side of the roofline here, elementwise kernels on the memory side
    by = {o["name"]: o for o in ops}
    assert by["qkv_proj"]["bound_fwd"] == "compute" and by["mlp_activation"]["bound_fwd"] == "memory"


def test_cli_prints_the_table_and_refuses_an_unknown_case(capsys):
    assert L.main(["nemo2604_h100_llama3_70b_fp8cs_64gpu"]) == 0
    out = capsys.readouterr().out
    assert "one dense layer, one micro-batch" in out and "layer (sum)" in out
    assert L.main(["no-such-case"]) == 2
    assert "case_id 'no-such-case' is not in" in capsys.readouterr().err
