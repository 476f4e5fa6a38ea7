"""CPU activation offload (Plan.offload_layers; Megatron-Core --cpu-offloading-num-layers, Transformer Engine
cpu_offload.py): the offloaded layers' activations leave the GPU, and the step waits only where the host link is
slower than the layers the copies hide behind."""
import dataclasses
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from roofline.base.errors import InputError
from roofline.model.predict import predict
from roofline.spec import hardware
from roofline.spec.config import Model, Plan, check
from roofline.views import validate as V

GB200 = hardware.load("gb200")
H100 = hardware.load("h100-sxm")
LLAMA = Model(n_layers=16, d_model=4096, n_heads=32, n_kv_heads=8, ffn_hidden=14336, mlp="swiglu", norm="rmsnorm",
              vocab=128256, seq_len=8192, position="rope")
PLAN = Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, sharding="fsdp")


def _raw(model=LLAMA, plan=PLAN, hw=GB200, **changes):
    return predict(model, dataclasses.replace(plan, **changes), hw).raw


def _slow_link(hw, bytes_per_s):
    return dataclasses.replace(hw, host_link=hardware.Link("test", bytes_per_s, 1e-5))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 15))
def test_each_offloaded_layer_takes_one_layers_activations_off_the_gpu(n):
    # one layer's stored activations, measured independently: what adding a layer to the model adds
    one = (_raw(model=dataclasses.replace(LLAMA, n_layers=17))["mem_activations"] - _raw()["mem_activations"])
    assert one > 0
    assert _raw()["mem_activations"] - _raw(offload_layers=n)["mem_activations"] == pytest.approx(n * one, rel=1e-9)
    # nothing else in memory moves
    for k in ("mem_weights", "mem_gradients", "mem_optimizer"):
        assert _raw(offload_layers=n)[k] == _raw()[k]


def test_copies_that_keep_pace_cost_nothing():
    # GB200's NVLink-C2C moves a Llama layer's activations faster than the layer computes: no wait
    base, off = _raw(), _raw(offload_layers=8)
    assert off["t_offload"] == 0
    assert off["step_time"] == base["step_time"]


def _te_schedule_wait(n, layers, c, f, b):
    """TE's default schedule replayed on two streams: before layer j's forward (fwd_step), the copy of layer j - 1
    (if offloaded) is queued on the offload stream after layer j - 1's compute and after the previous copy (c
    seconds each), then the compute stream waits for the copy of layer j - K (K = layers - n) if there is one. The
    forward's lateness is the last layer's delay; the backward's reloads mirror it with the backward time b."""
    keep = layers - n

    def late(t):
        start, end = [0.0] * layers, [0.0] * n
        for j in range(1, layers):
            if j - 1 < n:
                end[j - 1] = max(start[j - 1] + t, end[j - 2] if j >= 2 else 0.0) + c
            start[j] = start[j - 1] + t
            if 0 <= j - keep < n:
                start[j] = max(start[j], end[j - keep])
        return start[-1] + t - layers * t
    return late(f) + late(b)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 15), gbps=st.sampled_from([1.0, 5.0, 20.0, 60.0, 200.0, 5000.0]))
def test_the_wait_is_te_schedules_lateness(n, gbps):
    hw = _slow_link(GB200, gbps * 1e9)
    base, off = _raw(hw=hw), _raw(hw=hw, offload_layers=n)
    one = _raw(model=dataclasses.replace(LLAMA, n_layers=17), hw=hw)["mem_activations"] - base["mem_activations"]
    wait = _te_schedule_wait(n, LLAMA.n_layers, one / (gbps * 1e9), off["t_layer_fwd"], off["t_layer_bwd"])
    assert off["t_offload"] == pytest.approx(off["micro_batches"] * wait, rel=1e-9, abs=1e-12)
    assert off["t_offload_fwd"] + off["t_offload_bwd"] == pytest.approx(wait, rel=1e-9, abs=1e-12)
    assert off["step_time"] - base["step_time"] == pytest.approx(off["t_offload"], rel=1e-9, abs=1e-12)


def test_a_slow_link_waits_and_all_but_one_layer_exposes_the_first_copy():
    slow = _raw(hw=_slow_link(GB200, 2e9), offload_layers=8)
    assert slow["t_offload"] > 0
    # TE warns that num_layers == model_layers - 1 "prevents overlapping": each copy is due when it starts
    fast = _slow_link(GB200, 1e12)
    assert _raw(hw=fast, offload_layers=8)["t_offload"] == 0
    assert _raw(hw=fast, offload_layers=LLAMA.n_layers - 1)["t_offload"] > 0


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 15), gbps=st.floats(1.0, 2000.0), mb=st.sampled_from([1, 2]))
def test_offload_never_speeds_a_step_up_and_a_faster_link_never_slows_it(n, gbps, mb):
    p = dataclasses.replace(PLAN, micro_batch=mb, global_batch=8 * mb * 2)
    slow, fast = _slow_link(H100, gbps * 1e9), _slow_link(H100, 2 * gbps * 1e9)
    t_slow = _raw(plan=p, hw=slow, offload_layers=n)
    t_fast = _raw(plan=p, hw=fast, offload_layers=n)
    t_none = _raw(plan=p, hw=slow)
    assert t_slow["step_time"] >= t_none["step_time"]
    assert t_fast["step_time"] <= t_slow["step_time"]
    assert t_slow["mem_activations"] <= t_none["mem_activations"]


@pytest.mark.parametrize("changes, words", [
    ({"offload_layers": 16}, "must be below the model's layers (16)"),
    ({"offload_layers": 4, "pp": 2, "dp": 4}, "needs pp = 1, got pp 2"),
    ({"offload_layers": 4, "recompute": "selective"}, "needs recompute none, got 'selective'"),
    ({"offload_layers": -1}, "offload_layers must be a whole number of layers >= 0"),
])
def test_what_megatron_core_refuses_is_one_clear_line(changes, words):
    with pytest.raises(InputError, match="offload") as exc:
        check(LLAMA, dataclasses.replace(PLAN, **changes))
    assert words in str(exc.value)


def test_a_profile_without_a_host_link_refuses_offload_only():
    bare = dataclasses.replace(GB200, host_link=None)
    assert predict(LLAMA, PLAN, bare).raw["step_time"] > 0
    with pytest.raises(InputError, match="has no links.host"):
        predict(LLAMA, dataclasses.replace(PLAN, offload_layers=2), bare)


def test_cli_offload_flag_and_its_error():
    cmd = [sys.executable, "-m", "roofline", "transformer", "--model", "llama3-70b", "--gpu", "gb200", "--dp", "64",
           "--global-batch", "256", "--micro-batch", "2", "--sharding", "distributed", "--recompute", "none"]
    ok = subprocess.run(cmd + ["--offload-layers", "40", "--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(cmd + ["--offload-layers", "40", "--pp", "2", "--dp", "32"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "needs pp = 1" in bad.stderr


def test_validate_reads_the_offload_column_where_the_rows_layout_can_run_it():
    row = {"activation_offload": "40", "n_layers": 80}
    assert V._offload(row, {"pp": 1, "recompute": "none"}) == {"offload_layers": 40}
    # Megatron-Core refuses offload with pp > 1 or recomputation: a preset's count beside such a layout did not run
    assert V._offload(row, {"pp": 16, "recompute": "none"}) == {}
    assert V._offload(row, {"pp": 1, "recompute": "selective"}) == {}
    # fine-grained module offload is named, not counted: not modelled
    assert V._offload({"activation_offload": "fused_group_mlp (fine-grained)", "n_layers": 80},
                      {"pp": 1, "recompute": "none"}) == {}
    assert V._offload({"activation_offload": "", "n_layers": 80}, {"pp": 1}) == {}


def test_search_keeps_a_pinned_offload_and_only_the_plans_that_can_run_it():
    from roofline.views import search
    base = dataclasses.replace(search.default_base("megatron-core"), offload_layers=40)
    model = Model(n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, ffn_hidden=28672, mlp="swiglu",
                  norm="rmsnorm", vocab=128256, seq_len=8192, position="rope")
    cands = search.search(model, GB200, 64, 256, framework="megatron-core", base=base, top=50)
    assert cands
    for c in cands:
        assert c.plan.offload_layers == 40 and c.plan.pp == 1 and c.plan.recompute == "none"
        assert "offload=40" in search._plan_text(c.plan)
    with pytest.raises(InputError, match="needs pp = 1, got pp 2"):
        search.search(model, GB200, 64, 256, framework="megatron-core", base=base, pp=2)


def test_nemo_rows_that_state_offload_fit_only_with_it():
    # NVIDIA's GB200 Llama rows at pp 1 state CPU activation offload (Megatron-Bridge --activation_offload_layers):
    # their plans need it, and the model says the same: over the GPU's memory without it, under with it
    rows = {r["case_id"]: r for r in V.read(V.dataset_path("nemo"))}
    for cid, n in (("nemo2604_gb200_llama3_70b_fp8cs_64gpu", 40), ("nemo2509_gb200_llama31_405b_fp8cs_128gpu", 95)):
        case = V.build_case(rows[cid])
        assert case.spec.plan.offload_layers == n
        with_it = predict(case.spec.model, case.spec.plan, case.spec.hardware)
        without = predict(case.spec.model, dataclasses.replace(case.spec.plan, offload_layers=0), case.spec.hardware)
        assert with_it.fits_in_memory and not without.fits_in_memory, cid
