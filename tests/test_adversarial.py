"""Adversarial inputs at every boundary this package reads (issue 22): hardware profiles, model presets,
nccl-tests tables and samples CSVs, calibrated profiles before they are written, run-cost and timeline
arguments, JSON and file outputs.

Every bad input must give ONE line of :class:`InputError` naming the field (no traceback, no NaN, no
partial file); the bad files are generated here in ``tmp_path``. Cases run in-process (the loaders and
views directly, and ``roofline.face.cli.main`` for a subset) so the suite stays fast.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import types

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.spec import hardware, models
from roofline.base import schema
from roofline.spec.config import Model, Plan
from roofline.base.errors import InputError

DELETE = object()
PROFILE = {
    "id": "adv-gpu", "name": "adversarial test GPU", "kind": "datasheet",
    "peak_flops": {"fp32": "40 TFLOP/s", "bf16": "600 TFLOP/s", "fp16": "600 TFLOP/s", "fp8": None},
    "max_matmul": "500 TFLOP/s", "hbm_bandwidth": "3000 GB/s", "hbm_capacity": "80 GiB", "board_power": "700 W",
    "sm_count": 132, "gpus_per_node": 8,
    "links": {"intra": {"kind": "nvlink", "bandwidth": "450 GB/s", "latency": "8 us"},
              "inter": {"kind": "infiniband", "bandwidth": "50 GB/s", "latency": "12 us"}},
    "provenance": {"source": "test"},
}


def one_line(exc: BaseException, *needles: str) -> str:
    msg = str(exc)
    assert msg and "\n" not in msg and "Traceback" not in msg, msg
    for n in needles:
        assert n in msg, (n, msg)
    return msg


def _set(d: dict, dotted: str, value) -> dict:
    d = copy.deepcopy(d)
    keys = dotted.split(".")
    cur = d
    for k in keys[:-1]:
        cur = cur.setdefault(k, {})
    if value is DELETE:
        cur.pop(keys[-1], None)
    else:
        cur[keys[-1]] = value
    return d


def _profile(tmp_path, updates: dict, name: str = "gpu.yaml"):
    d = PROFILE
    for k, v in updates.items():
        d = _set(d, k, v)
    p = tmp_path / name
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return p


def test_valid_profile_loads(tmp_path):
    """The base of every case below is a valid profile (so each case fails for its one mutation)."""
    hw = hardware.load(str(_profile(tmp_path, {})))
    assert hw.gpus_per_node == 8 and hw.hbm_bandwidth == pytest.approx(3e12)


NAN, INF = float("nan"), float("inf")
PROFILE_CASES = [
    # (updates, words the one-line message must contain)
    ({"hbm_bandwidth": "-3 TB/s"}, "hbm_bandwidth"), ({"hbm_bandwidth": "0 GB/s"}, "hbm_bandwidth"),
    ({"hbm_bandwidth": "inf GB/s"}, "hbm_bandwidth"), ({"hbm_bandwidth": "nan GB/s"}, "hbm_bandwidth"),
    ({"hbm_bandwidth": "1e400 GB/s"}, "hbm_bandwidth"), ({"hbm_bandwidth": "3 GB"}, "hbm_bandwidth"),
    ({"hbm_bandwidth": 3000}, "hbm_bandwidth"), ({"hbm_bandwidth": "fast"}, "hbm_bandwidth"),
    ({"hbm_bandwidth": [1, 2]}, "hbm_bandwidth"), ({"hbm_bandwidth": {"a": 1}}, "hbm_bandwidth"),
    ({"hbm_bandwidth": DELETE}, "missing field 'hbm_bandwidth'"), ({"hbm_bandwidth": True}, "hbm_bandwidth"),
    ({"hbm_capacity": "-80 GiB"}, "hbm_capacity"), ({"hbm_capacity": "0 GiB"}, "hbm_capacity"),
    ({"hbm_capacity": "inf GiB"}, "hbm_capacity"), ({"hbm_capacity": "80 GB/s"}, "hbm_capacity"),
    ({"hbm_capacity": DELETE}, "missing field 'hbm_capacity'"),
    ({"board_power": "-400 W"}, "board_power"), ({"board_power": "0 W"}, "board_power"),
    ({"board_power": "400 GB"}, "board_power"), ({"board_power": "nan W"}, "board_power"),
    ({"peak_flops.bf16": "-1 TFLOP/s"}, "peak_flops.bf16"), ({"peak_flops.bf16": "0 TFLOP/s"}, "peak_flops.bf16"),
    ({"peak_flops.bf16": "inf TFLOP/s"}, "peak_flops.bf16"), ({"peak_flops.bf16": "nan TFLOP/s"}, "peak_flops.bf16"),
    ({"peak_flops.fp16": "312 TB/s"}, "peak_flops.fp16"), ({"peak_flops.bf17": "1 TFLOP/s"}, "did you mean 'bf16'"),
    ({"peak_flops": "312 TFLOP/s"}, "peak_flops"), ({"peak_flops": [1]}, "peak_flops"),
    ({"peak_flops": {"fp32": "40 TFLOP/s"}}, "bf16 or fp16"), ({"peak_flops": DELETE}, "missing field 'peak_flops'"),
    ({"max_matmul": "-1 TFLOP/s"}, "max_matmul"), ({"max_matmul": "999 PFLOP/s"}, "max_matmul"),
    ({"gpus_per_node": 0}, "gpus_per_node"), ({"gpus_per_node": -8}, "gpus_per_node"),
    ({"gpus_per_node": 2.5}, "gpus_per_node"), ({"gpus_per_node": "eight"}, "gpus_per_node"),
    ({"gpus_per_node": NAN}, "gpus_per_node"), ({"gpus_per_node": INF}, "gpus_per_node"),
    ({"gpus_per_node": True}, "gpus_per_node"), ({"gpus_per_node": None}, "gpus_per_node"),
    ({"sm_count": 0}, "sm_count"), ({"sm_count": 1.5}, "sm_count"), ({"sm_count": "many"}, "sm_count"),
    ({"sustained_clock": 0.03}, "sustained_clock"), ({"sustained_clock": 0}, "sustained_clock"),
    ({"sustained_clock": -1}, "sustained_clock"), ({"sustained_clock": 1.2}, "sustained_clock"),
    ({"sustained_clock": NAN}, "sustained_clock"), ({"sustained_clock": "fast"}, "sustained_clock"),
    ({"sustained_clock": True}, "sustained_clock"), ({"sustained_clock": 0.29}, "sustained_clock"),
    ({"hbm_capacty": "80 GiB"}, "did you mean 'hbm_capacity'"), ({"gpus_per_nod": 8}, "did you mean 'gpus_per_node'"),
    ({"peak_flop": {}}, "did you mean 'peak_flops'"), ({"link": {}}, "did you mean 'links'"),
    ({"colour": "green"}, "unknown key 'colour'"),
    ({"links": "fast"}, "links"), ({"links.intra": "fast"}, "links.intra"),
    ({"links.intra.bandwidth": "0 GB/s"}, "links.intra.bandwidth"),
    ({"links.intra.bandwidth": "-1 GB/s"}, "links.intra.bandwidth"),
    ({"links.inter.bandwidth": "nan GB/s"}, "links.inter.bandwidth"),
    ({"links.inter.latency": "-5 us"}, "links.inter.latency"), ({"links.inter.latency": "5 GB"}, "links.inter.latency"),
    ({"links.intra.bandwith": "1 GB/s"}, "did you mean 'bandwidth'"), ({"links.intra": DELETE}, "intra"),
    ({"links.intra.bandwidth": DELETE}, "bandwidth"), ({"links.extra": {}}, "unknown key 'extra'"),
    ({"links.intra.kind": 5}, "links.intra.kind"),
    ({"efficiency": {"gemm": 5}}, "efficiency.gemm"), ({"efficiency": {"gemm": {"fwd": 5}}}, "efficiency.gemm.fwd"),
    ({"efficiency": 5}, "efficiency"),
    ({"efficiency": {"gemm": {"fwd": {"eta": 5}}}}, "efficiency.gemm.fwd.eta"),
    ({"efficiency": {"gemm": {"fwd": {"eta": 0}}}}, "efficiency.gemm.fwd.eta"),
    ({"efficiency": {"gemm": {"fwd": {"eta": -0.5}}}}, "efficiency.gemm.fwd.eta"),
    ({"efficiency": {"gemm": {"fwd": {"eta": NAN}}}}, "efficiency.gemm.fwd.eta"),
    ({"efficiency": {"gemm": {"fwd": {"eta": "abc"}}}}, "efficiency.gemm.fwd.eta"),
    ({"efficiency": {"norm": {"bwd": {"mu": 0}}}}, "efficiency.norm.bwd.mu"),
    ({"efficiency": {"norm": {"bwd": {"mu": 1.01}}}}, "efficiency.norm.bwd.mu"),
    ({"efficiency": {"elem": {"fwd": {"t0": "-5 us"}}}}, "efficiency.elem.fwd.t0"),
    ({"efficiency": {"elem": {"fwd": {"t0": 5}}}}, "efficiency.elem.fwd.t0"),
    ({"efficiency": {"elem": {"fwd": {"t0": "5 GB"}}}}, "efficiency.elem.fwd.t0"),
    ({"efficiency": {"gem": {"fwd": {"eta": 0.5}}}}, "did you mean 'gemm'"),
    ({"efficiency": {"gemm": {"fwd": {"etta": 0.5}}}}, "did you mean 'eta'"),
    ({"efficiency": {"gemm": {"forward": {"eta": 0.5}}}}, "unknown key 'forward'"),
    ({"efficiency": {"gemm": {"fwd": {"d_soft": 3}}}}, "unknown key 'd_soft'"),
    ({"efficiency": {"attn": {"fwd": {"d_reg": 0}}}}, "efficiency.attn.fwd.d_reg"),
    ({"efficiency": {"attn": {"fwd": {"d_reg": NAN}}}}, "efficiency.attn.fwd.d_reg"),
    ({"efficiency": {"attn": {"bwd": {"uneven": -1}}}}, "efficiency.attn.bwd.uneven"),
    ({"efficiency": {"attn": {"bwd": {"d_io": "x"}}}}, "efficiency.attn.bwd.d_io"),
    ({"efficiency": {"bmm": {"fwd": {"reread": 1.5}}}}, "efficiency.bmm.fwd.reread"),
    ({"efficiency": {"bmm": {"fwd": {"dhalf": -1}}}}, "efficiency.bmm.fwd.dhalf"),
    ({"efficiency": {"dhalf": -1}}, "efficiency.dhalf"), ({"efficiency": {"dhalf": "x"}}, "efficiency.dhalf"),
    ({"collectives": {"intra": {"ar": {"busbw": "200 GB/s"}}}}, "missing 'alpha'"),
    ({"collectives": {"intra": {"ar": {"alpha": "5 us"}}}}, "missing 'busbw'"),
    ({"collectives": {"intra": {"ar": {"alpha": "5 us", "busbw": "0 GB/s"}}}}, "collectives.intra.ar.busbw"),
    ({"collectives": {"intra": {"ar": {"alpha": "5 us", "busbw": "-1 GB/s"}}}}, "collectives.intra.ar.busbw"),
    ({"collectives": {"inter": {"ag": {"alpha": "-1 us", "busbw": "10 GB/s"}}}}, "collectives.inter.ag.alpha"),
    ({"collectives": {"inter": {"ag": {"alpha": "1 us", "busbw": "nan GB/s"}}}}, "collectives.inter.ag.busbw"),
    ({"collectives": {"intra": {"allreduce": {"alpha": "5 us", "busbw": "1 GB/s"}}}}, "unknown key 'allreduce'"),
    ({"collectives": {"intranode": {}}}, "did you mean 'intra'"),
    ({"collectives": {"intra": {"ar": 5}}}, "collectives.intra.ar"), ({"collectives": {"intra": 5}}, "collectives.intra"),
    ({"collectives": {"intra": {"ar": {"alpha": "5 us", "busbw": "1 GB/s", "beta": 1}}}}, "unknown key 'beta'"),
    ({"host": {"layer_fwd": "-1 us"}}, "host.layer_fwd"), ({"host": {"kernels_fwd": 2.5}}, "host.kernels_fwd"),
    ({"host": {"kernels_fwd": -1}}, "host.kernels_fwd"), ({"host": {"launch": "5 GB"}}, "host.launch"),
    ({"host": {"layer_fwdd": "1 us"}}, "did you mean 'layer_fwd'"), ({"host": 5}, "host"),
    ({"base": "no-such-gpu"}, "unknown GPU/hardware profile 'no-such-gpu'"), ({"base": 5}, "base"),
    ({"efficiency_from": "no-such-gpu"}, "no-such-gpu"), ({"collectives_from": ["a"]}, "collectives_from"),
    ({"sources": 5}, "sources"), ({"provenance": 5}, "provenance"), ({"name": {"a": 1}}, "name"),
]


@pytest.mark.parametrize("updates,needle", PROFILE_CASES, ids=[f"profile-{i}" for i in range(len(PROFILE_CASES))])
def test_bad_profile(tmp_path, updates, needle):
    with pytest.raises(InputError) as e:
        hardware.load(str(_profile(tmp_path, updates)))
    one_line(e.value, needle, "gpu.yaml")


RAW_PROFILES = [
    (b"id: x\n\xff\xfe bad bytes\n", "not UTF-8"), (b"id: x\n  bad: [\n", "malformed YAML"),
    (b"- a\n- b\n", "mapping"), (b"42\n", "mapping"), (b"", "mapping"), (b"id: x\nid: y\n: :\n", "profile"),
    ("id: é\nhbm_bandwidth: 3 TB/s\n".encode("latin-1"), "line 1"),
]


RAW_PRESETS = [(b"n_layers: 4\n\xc3\x28\n", "not UTF-8"), (b"n_layers: [\n", "malformed YAML"), (b"- 1\n", "mapping"),
               (b"", "mapping")]


@pytest.mark.parametrize("kind,content,needle", [("profile", *c) for c in RAW_PROFILES] +
                         [("preset", *c) for c in RAW_PRESETS])
def test_unreadable_yaml(tmp_path, kind, content, needle):
    p = tmp_path / "raw.yaml"
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        (hardware.load if kind == "profile" else models.load)(str(p))
    one_line(e.value, needle)


def test_circular_base(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(f"base: {b}\nid: a\n")
    b.write_text(f"base: {a}\nid: b\n")
    with pytest.raises(InputError) as e:
        hardware.load(str(a))
    one_line(e.value, "circular")


def test_bad_value_in_a_base_names_the_base_file(tmp_path):
    base = _profile(tmp_path, {"hbm_bandwidth": "-1 TB/s"}, "base.yaml")
    child = tmp_path / "child.yaml"
    child.write_text(f"base: {base}\nid: child\n")
    with pytest.raises(InputError) as e:
        hardware.load(str(child))
    one_line(e.value, "base.yaml", "hbm_bandwidth")


def test_bundled_profiles_pass_the_schema():
    for pid in hardware.list_ids():
        hw = hardware.load(pid)
        assert hardware.SUSTAINED_CLOCK_MIN <= hw.sustained_clock <= 1 and hw.gpus_per_node >= 1


# ---- Python API of hardware ---------------------------------------------------------------------
@pytest.mark.parametrize("ref", [None, 5, 2.5, "", "   ", ["a100-sxm4-80gb"], {"id": "x"}, b"a100-sxm4-80gb"])
def test_hardware_load_bad_ref(ref):
    with pytest.raises(InputError) as e:
        hardware.load(ref)
    one_line(e.value, "hardware profile")


@pytest.mark.parametrize("gbps", [0, -100, NAN, INF, -INF, "100", True, None, [100]])
def test_with_network_bad_rate(gbps):
    with pytest.raises(InputError) as e:
        hardware.load("a100-sxm4-80gb").with_network(gbps)
    one_line(e.value, "network line rate")


def test_with_network_valid_scales_busbw():
    hw = hardware.load("a100-sxm4-80gb")
    slow, fast = hw.with_network(100), hw.with_network(400)
    assert fast.inter.bandwidth == pytest.approx(4 * slow.inter.bandwidth)
    assert fast.collectives["ar", "inter"][1] == pytest.approx(4 * slow.collectives["ar", "inter"][1])


@pytest.mark.parametrize("changes,needle", [
    ({"gpus_per_node": 0}, "gpus_per_node"), ({"gpus_per_node": 2.5}, "gpus_per_node"),
    ({"gpus_per_node": "8"}, "gpus_per_node"), ({"hbm_bandwidth": -1.0}, "hbm_bandwidth"),
    ({"hbm_capacity": NAN}, "hbm_capacity"), ({"board_power": -7.0}, "board_power"),
    ({"sustained_clock": 0.03}, "sustained_clock"), ({"matmul_ceiling": 1.5}, "matmul_ceiling"),
    ({"peak_flops": {"bf16": -1.0}}, "peak_flops.bf16"), ({"host_fwd": -1e-6}, "host_fwd"),
    ({"sm_count": 0}, "sm_count"),
])
def test_hardware_replace_checked(changes, needle):
    with pytest.raises(InputError) as e:
        dataclasses.replace(hardware.load("h100-sxm"), **changes)
    one_line(e.value, needle)


@pytest.mark.parametrize("bw,lat", [(0.0, 1e-6), (-1.0, 1e-6), (NAN, 1e-6), (1e9, -1e-6), (1e9, INF)])
def test_link_checked(bw, lat):
    with pytest.raises(InputError) as e:
        hardware.Link("nvlink", bw, lat)
    one_line(e.value, "link nvlink")


# ---- model presets ------------------------------------------------------------------------------
PRESET = {"id": "adv-model", "name": "adversarial", "n_layers": 4, "d_model": 256, "n_heads": 4, "n_kv_heads": 4,
          "ffn_hidden": 1024, "mlp": "gelu", "norm": "layernorm", "vocab": 1000, "seq_len": 128,
          "tied_embeddings": True, "position": "learned", "biases": True, "n_experts": 1, "top_k": 1}
PRESET_CASES = [
    ({"n_layers": "many"}, "n_layers"), ({"n_layers": "24"}, "n_layers"), ({"n_layers": 0}, "n_layers"),
    ({"n_layers": -1}, "n_layers"), ({"n_layers": 2.5}, "n_layers"), ({"n_layers": NAN}, "n_layers"),
    ({"n_layers": INF}, "n_layers"), ({"n_layers": True}, "n_layers"), ({"n_layers": None}, "n_layers"),
    ({"n_layers": [4]}, "n_layers"), ({"vocab": 50257.5}, "vocab"), ({"vocab": "50257"}, "vocab"),
    ({"d_model": "4096"}, "d_model"), ({"seq_len": -128}, "seq_len"), ({"n_heads": 0}, "n_heads"),
    ({"n_kv_heads": 0}, "n_kv_heads"), ({"ffn_hidden": "big"}, "ffn_hidden"), ({"n_experts": 1.5}, "n_experts"),
    ({"top_k": 0}, "top_k"),
    ({"tied_embeddings": "maybe"}, "tied_embeddings"), ({"tied_embeddings": 1}, "tied_embeddings"),
    ({"tied": "yes"}, "tied_embeddings"), ({"causal": "no"}, "causal"), ({"biases": 2}, "biases"),
    ({"dropout": "maybe"}, "dropout"),
    ({"position": "xpos"}, "position"), ({"position": 5}, "position"), ({"mlp": "relu"}, "mlp"),
    ({"mlp": "swiglu2"}, "did you mean 'swiglu'"), ({"norm": "batchnorm"}, "norm"), ({"attention": "sparse"}, "attention"),
    ({"capacity_factor": 0}, "capacity_factor"), ({"capacity_factor": -1}, "capacity_factor"),
    ({"capacity_factor": INF}, "capacity_factor"), ({"capacity_factor": NAN}, "capacity_factor"),
    ({"capacity_factor": "1.25"}, "capacity_factor"),
    ({"capacity_factor": 1e300, "n_experts": 8, "top_k": 2}, "capacity_factor must be at most n_experts / top_k"),
    ({"n_layer": 4}, "did you mean 'n_layers'"), ({"hidden_size": 4}, "unknown key 'hidden_size'"),
    ({"capacity": 1.0, "capacity_factor": 1.0}, "given twice"), ({"name": {"a": 1}}, "name"),
]


def _preset(tmp_path, updates):
    d = {**PRESET, **updates}
    p = tmp_path / "model.yaml"
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return p


def test_valid_preset_loads(tmp_path):
    m = models.load(str(_preset(tmp_path, {})))
    assert m.n_layers == 4 and m.vocab == 1000 and m.position == "learned"


@pytest.mark.parametrize("updates,needle", PRESET_CASES, ids=[f"preset-{i}" for i in range(len(PRESET_CASES))])
def test_bad_preset(tmp_path, updates, needle):
    with pytest.raises(InputError) as e:
        models.load(str(_preset(tmp_path, updates)))
    one_line(e.value, needle)




@pytest.mark.parametrize("ref", [None, 3, "", ["gpt3-1.3b"]])
def test_models_load_bad_ref(ref):
    with pytest.raises(InputError) as e:
        models.load(ref)
    one_line(e.value, "model")


@pytest.mark.parametrize("d", [5, "gpt3", [1, 2], None])
def test_from_dict_not_a_mapping(d):
    with pytest.raises(InputError) as e:
        models.from_dict(d)
    one_line(e.value, "mapping")


def test_bundled_presets_pass_the_schema():
    for mid in models.list_ids():
        m = models.load(mid)
        assert isinstance(m.n_layers, int) and m.position in models.POSITIONS


# ---- nccl-tests tables and samples CSVs ---------------------------------------------------------
HEAD = "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)\n"


def _row(size, t_ns, p=8):
    bus = size / t_ns * 2 * (p - 1) / p      # GB/s (bytes/ns)
    return f"{size},{size // 4},float,{t_ns},{bus:.4f},{t_ns},{bus:.4f}\n"


def _table(sizes=(2 ** 20, 2 ** 22, 2 ** 24, 2 ** 26), alpha_ns=20000.0, bw=200.0, p=8):
    return HEAD + "".join(_row(s, alpha_ns + 2 * (p - 1) / p * s / bw, p) for s in sizes)


NCCL_CASES = [
    ("AR_GPU8.csv", HEAD + "1048576,262144,float,nan,19.78,92150,19.91\n", "non-finite"),
    ("AR_GPU8.csv", HEAD + "1048576,262144,float,92790,inf,92150,19.91\n", "non-finite"),
    ("AR_GPU8.csv", HEAD, "header only"),
    ("AR_GPU8.csv", "# comment only\n", "no data rows"), ("AR_GPU8.csv", "", "no data rows"),
    ("AR_GPU0.csv", _table(), "0 rank"), ("AR_GPU1.csv", _table(), "1 rank"),
    ("AR_GPU8.csv", HEAD + "-1048576,262144,float,92790,19.78,92150,19.91\n", "positive"),
    ("AR_GPU8.csv", HEAD + "1048576,262144,float,0,19.78,92150,19.91\n", "positive"),
    ("AR_GPU8.csv", HEAD + "1048576,262144,float,ninety,19.78,92150,19.91\n", "malformed"),
    ("AR_GPU8.csv", HEAD + "1048576,262144,float\n", "malformed"),
    ("AR_GPU8.csv", "bytes,count\n1,2\n", "expected a header"),
    ("AR_GPU4.csv", _table(p=8), "does not match all-reduce on 4 ranks"),
    ("ar.csv", HEAD + "1048576,262144,float,92790,40.0,92150,40.0\n", "rank count"),
]


@pytest.mark.parametrize("name,content,needle", NCCL_CASES, ids=[f"nccl-{i}" for i in range(len(NCCL_CASES))])
def test_bad_nccl_table(tmp_path, name, content, needle):
    from roofline.views.calibrate import importers
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(InputError) as e:
        importers.import_nccl_tests(p)
    one_line(e.value, needle)


def test_nccl_table_not_utf8(tmp_path):
    from roofline.views.calibrate import importers
    p = tmp_path / "AR_GPU8.csv"
    p.write_bytes(HEAD.encode() + b"1048576,262144,\xff\xfe,92790,19.78,92150,19.91\n")
    with pytest.raises(InputError) as e:
        importers.import_nccl_tests(p)
    one_line(e.value, "not UTF-8", "line 2")


@pytest.mark.parametrize("p", [0, 1, -8, 2.5, NAN, "8"])
def test_nccl_bad_rank_argument(tmp_path, p):
    from roofline.views.calibrate import importers
    f = tmp_path / "t.csv"
    f.write_text(_table())
    with pytest.raises(InputError) as e:
        importers.import_nccl_tests(f, p=p)
    one_line(e.value, "rank count")


@pytest.mark.parametrize("content,needle", [
    (HEAD + _row(2 ** 24, 100000.0), "samples"),                                   # one row
    (HEAD + _row(2 ** 24, 100000.0) * 6, "two different message sizes"),           # one row repeated
    (HEAD + "".join(_row(s, 100000.0) for s in (2 ** 20, 2 ** 22, 2 ** 24, 2 ** 26)), "every time is the same"),
])
def test_unidentifiable_nccl_fit_is_refused(tmp_path, content, needle):
    """No '0.0 % held-out MAPE' from a table that cannot tell alpha from busbw."""
    from roofline.views.calibrate import importers, profile
    f = tmp_path / "AR_GPU8.csv"
    f.write_text(content)
    with pytest.raises(InputError) as e:
        profile.nccl_tests_profile([importers.import_nccl_tests(f)], "x", k=3)
    one_line(e.value, needle)


def test_identifiable_nccl_fit_recovers_alpha_and_busbw(tmp_path):
    """A synthetic table t = 2(p-1) alpha + 2(p-1)/p S / busbw (alpha 1.43 us, busbw 200 GB/s) is fitted back."""
    from roofline.views.calibrate import importers, profile
    f = tmp_path / "AR_GPU8.csv"
    f.write_text(_table(sizes=[2 ** k for k in range(14, 30)], alpha_ns=14 * 1430.0, bw=200.0))
    _, _, rep = profile.nccl_tests_profile([importers.import_nccl_tests(f)], "x", k=3)
    assert rep["fit"].busbw == pytest.approx(200e9, rel=0.02) and rep["fit"].alpha == pytest.approx(1.43e-6, rel=0.05)


def test_no_tables():
    from roofline.views.calibrate import profile
    with pytest.raises(InputError) as e:
        profile.nccl_tests_profile([], "x")
    one_line(e.value, "no tables")


@pytest.mark.parametrize("size,p,t,needle", [
    ([1e6, 2e6, NAN], 8, [1e-4, 2e-4, 3e-4], "finite"), ([1e6, 2e6, 4e6], 8, [1e-4, INF, 3e-4], "finite"),
    ([1e6, 2e6, 4e6], 1, [1e-4, 2e-4, 3e-4], "at least 2 ranks"), ([1e6, 2e6, 4e6], 8, [1e-4, -2e-4, 3e-4], "positive"),
    ([], 8, [], "0 samples"), ([1e6, 2e6], 8, [1e-4, 2e-4], "2 samples"),
])
def test_fit_alpha_beta_refuses(size, p, t, needle):
    from roofline.views.calibrate import fit
    with pytest.raises(InputError) as e:
        fit.fit_alpha_beta(np.array(size, float), np.full(len(size), p), np.array(t, float), "ar")
    one_line(e.value, needle)


SAMPLES_HEAD = "mp,b,l,dim,F_dur(us),B_dur(us)\n"


@pytest.mark.parametrize("content,needle", [
    (SAMPLES_HEAD.encode() + b"1,2,1024,2048,10.0,\xff0\n", "not UTF-8"),
    (SAMPLES_HEAD.encode() + b"1,2,1024,2048,nan,20.0\n", "non-finite"),
    (SAMPLES_HEAD.encode() + b"1,2,1024,2048,inf,20.0\n", "non-finite"),
    (SAMPLES_HEAD.encode(), "no data rows"), (b"", "empty file"),
    (b"mp,b\n1,2\n", "missing column"),
])
def test_bad_samples_csv(tmp_path, content, needle):
    from roofline.views.calibrate import importers
    p = tmp_path / "s.csv"
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        importers.read_csv(p, ("mp", "b", "l", "dim", "F_dur(us)", "B_dur(us)"))
    one_line(e.value, needle)


# ---- a calibrated profile is checked before it is written ----------------------------------------
HEADER = {"id": "cal", "name": "calibrated", "kind": "calibrated", "base": "h100-sxm"}


@pytest.mark.parametrize("header,eff,needle", [
    ({**HEADER, "sustained_clock": 0.03}, None, "sustained_clock"),
    ({**HEADER, "sustained_clock": 1.5}, None, "sustained_clock"),
    ({**HEADER, "gpus_per_node": 0}, None, "gpus_per_node"),
    ({**HEADER, "hbm_bandwidth": "-1 GB/s"}, None, "hbm_bandwidth"),
    (HEADER, {"gemm": {"fwd": {"eta": 1.5, "mu": 0.8, "t0": "5 us"}}}, "efficiency.gemm.fwd.eta"),
    (HEADER, {"gemm": {"fwd": {"eta": 0.8, "mu": 0.8, "t0": "-5 us"}}}, "efficiency.gemm.fwd.t0"),
    ({**HEADER, "sustained_clok": 0.9}, None, "did you mean 'sustained_clock'"),
])
def test_profile_text_refuses_implausible_values(header, eff, needle):
    from roofline.views.calibrate import profile
    with pytest.raises(InputError) as e:
        profile.profile_text(header, eff, None, {"source": "test"})
    one_line(e.value, needle)


def test_profile_text_round_trips(tmp_path):
    from roofline.views.calibrate import profile
    text = profile.profile_text({**HEADER, "sustained_clock": 0.9},
                                {"gemm": {"fwd": {"eta": 0.8, "mu": 0.8, "t0": "5 us"}}}, None, {"source": "t"})
    p = tmp_path / "cal.yaml"
    p.write_text(text)
    hw = hardware.load(str(p))
    assert hw.sustained_clock == 0.9 and hw.efficiency["gemm"]["fwd"][0] == pytest.approx(0.8)


# ---- run-cost -----------------------------------------------------------------------------------
SMALL = Model(n_layers=4, d_model=256, n_heads=4, vocab=1000, seq_len=128)
PLAN = Plan(tp=2, dp=2, micro_batch=1, global_batch=4)


@pytest.mark.parametrize("kw,needle", [
    ({"tokens": NAN}, "tokens"), ({"tokens": INF}, "tokens"), ({"tokens": 0}, "tokens"), ({"tokens": -1e9}, "tokens"),
    ({"tokens": "1e9"}, "tokens"), ({"tokens": None}, "tokens"), ({"tokens": True}, "tokens"),
    ({"flop_rate": INF}, "flop-rate"), ({"flop_rate": NAN}, "flop-rate"), ({"flop_rate": 0}, "flop-rate"),
    ({"flop_rate": -1e14}, "flop-rate"), ({"flop_rate": "1e14"}, "flop-rate"), ({"flop_rate": 1e20}, "exceeds"),
    ({"utilization": 0}, "utilization"), ({"utilization": -0.5}, "utilization"), ({"utilization": 1.5}, "utilization"),
    ({"utilization": NAN}, "utilization"), ({"utilization": INF}, "utilization"),
    ({"tp_intra": -2}, "tp-intra"), ({"tp_intra": 0}, "tp-intra"), ({"tp_intra": 1.5}, "tp-intra"),
    ({"tp_inter": -1}, "tp-inter"), ({"tp_inter": NAN}, "tp-inter"),
    ({"tp_intra": 4}, "tp-intra x tp-inter"), ({"tp_intra": 1, "tp_inter": 1}, "tp-intra x tp-inter"),
])
def test_run_cost_bad_arguments(kw, needle):
    from roofline.views import runcost
    kw = {"tokens": 1e9, **kw}
    tokens = kw.pop("tokens")
    with pytest.raises(InputError) as e:
        runcost.run_cost(SMALL, PLAN, hardware.load("a100-sxm4-80gb"), tokens, **kw)
    one_line(e.value, needle)


def _strict_loads(text):
    def bad(c):
        raise AssertionError(f"non-JSON constant {c}")
    return json.loads(text, parse_constant=bad)


def test_run_cost_json_is_strict_and_utilization_is_used(capsys):
    from roofline.face.cli import main
    args = ["run-cost", "--layers", 4, "--d-model", 256, "--heads", 4, "--vocab", 1000, "--seq-len", 128,
            "--tp", 2, "--dp", 2, "--global-batch", 4, "--tokens", 1e9, "--json"]
    assert main([str(a) for a in args + ["--utilization", 0.5]]) == 0
    d = _strict_loads(capsys.readouterr().out)
    assert d["utilization"] == pytest.approx(0.5) and "50 %" in d["runtime_source"]


@pytest.mark.parametrize("flag,value,needle", [
    ("--flop-rate", "inf", "flop-rate"), ("--flop-rate", "nan", "flop-rate"), ("--utilization", "0", "utilization"),
    ("--utilization", "2", "utilization"), ("--tp-intra", "-2", "tp-intra"), ("--tp-inter", "0", "tp-inter"),
    ("--tokens", "nan", "tokens"), ("--tokens", "0", "tokens"), ("--tokens", "-5", "tokens"),
])
def test_run_cost_cli(capsys, flag, value, needle):
    from roofline.face.cli import main
    rc = main(["run-cost", "--model", "gpt3-125m", "--dp", "8", "--global-batch", "64", "--tokens", "1e9",
               flag, value])
    err = capsys.readouterr()
    assert rc == 2 and err.out == "" and "Traceback" not in err.err
    assert len(err.err.strip().splitlines()) == 1 and needle in err.err


# ---- strict JSON --------------------------------------------------------------------------------
finite_or_not = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.none(), st.booleans(),
                          st.text(max_size=5))
nested = st.recursive(finite_or_not, lambda ch: st.one_of(st.lists(ch, max_size=4),
                                                          st.dictionaries(st.text(max_size=4), ch, max_size=4)),
                      max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), nested, max_size=5))
def test_strict_json_never_emits_nan(obj):
    text = schema.strict_json(obj)
    back = _strict_loads(text)
    # every non-finite float became null with a reason; every finite number survived unchanged
    reasons = back.get("null_reasons", {}) if isinstance(back, dict) else {}

    def walk(a, b, path):
        if isinstance(a, dict):
            for k in a:
                walk(a[k], b[k], f"{path}.{k}" if path else str(k))
        elif isinstance(a, (list, tuple)):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif isinstance(a, float) and not math.isfinite(a):
            assert b is None and path in reasons
        else:
            assert b == a
    walk(obj, back, "")


def test_strict_json_numpy_values():
    text = schema.strict_json({"a": np.float64("nan"), "b": np.int64(3), "c": np.float32(1.5), "d": (1, np.inf)})
    assert _strict_loads(text) == {"a": None, "b": 3, "c": 1.5, "d": [1, None],
                                   "null_reasons": {"a": "not a finite number (nan)", "d[1]": "not a finite number (inf)"}}


# ---- timeline of a non-finite prediction; atomic outputs ---------------------------------------------
def _pred():
    from roofline.model.predict import predict
    return predict(SMALL, Plan(pp=2, dp=2, micro_batch=1, global_batch=8), hardware.load("a100-sxm4-80gb"))


@pytest.mark.parametrize("key,value", [("step_time", NAN), ("t_forward", INF), ("t_pp_comm", NAN),
                                       ("t_dp_comm", -1.0), ("micro_batches", NAN)])
@pytest.mark.parametrize("view", ["per_stage", "events", "trace"])
def test_timeline_of_non_finite_prediction(key, value, view):
    from roofline.views import timeline
    p = _pred()
    bad = types.SimpleNamespace(**{k: getattr(p, k) for k in ("model", "plan", "hardware", "micro_batches")},
                                raw={**p.raw, key: value})
    with pytest.raises(InputError) as e:
        getattr(timeline, view)(bad)
    one_line(e.value, key)


def test_write_trace_is_atomic_and_strict(tmp_path):
    from roofline.views import timeline
    p = _pred()
    out = tmp_path / "trace.json"
    out.write_text("previous")
    bad = types.SimpleNamespace(**{k: getattr(p, k) for k in ("model", "plan", "hardware", "micro_batches")},
                                raw={**p.raw, "step_time": NAN})
    with pytest.raises(InputError):
        timeline.write_trace(bad, out)
    assert out.read_text() == "previous" and os.listdir(tmp_path) == ["trace.json"]
    timeline.write_trace(p, out)
    assert _strict_loads(out.read_text())["otherData"]["step_time_s"] > 0
    with pytest.raises(InputError) as e:
        timeline.write_trace(p, tmp_path / "no-such-folder" / "t.json")
    one_line(e.value, "--trace")


def test_plot_save_is_atomic(tmp_path):
    pytest.importorskip("matplotlib")
    from roofline.views import plotting
    plt = plotting.pyplot("--plot")
    out = tmp_path / "fig.png"
    out.write_bytes(b"previous")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])

    def broken(path, **kw):               # writes half a file, then fails
        with open(path, "wb") as fh:
            fh.write(b"\x89PNG partial")
        raise OSError(28, "No space left on device")
    fig.savefig = broken
    with pytest.raises(InputError) as e:
        plotting.save(fig, str(out), "--plot")
    one_line(e.value, "--plot", "No space left")
    assert out.read_bytes() == b"previous" and os.listdir(tmp_path) == ["fig.png"]
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    plotting.save(fig, str(out), "--plot")
    assert out.read_bytes()[:4] == b"\x89PNG" and os.listdir(tmp_path) == ["fig.png"]


def test_atomic_path_keeps_the_old_file_on_error(tmp_path):
    out = tmp_path / "x.txt"
    out.write_text("old")
    with pytest.raises(RuntimeError):
        with schema.atomic_path(out) as tmp:
            open(tmp, "w").write("half")
            raise RuntimeError("boom")
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["x.txt"]
    schema.write_text_atomic(out, "new")
    assert out.read_text() == "new" and os.listdir(tmp_path) == ["x.txt"]


# ---- the CLI boundary (in-process): one line on stderr, exit 2, nothing on stdout -------------------
CLI_PROFILE_CASES = [PROFILE_CASES[i] for i in (0, 32, 35, 44, 51, 57, 71, 97)]


@pytest.mark.parametrize("updates,needle", CLI_PROFILE_CASES)
def test_cli_bad_profile(tmp_path, capsys, updates, needle):
    from roofline.face.cli import main
    p = _profile(tmp_path, updates)
    rc = main(["transformer", "--model", "gpt3-125m", "--gpu", str(p)])
    err = capsys.readouterr()
    assert rc == 2 and err.out == "" and "Traceback" not in err.err
    assert len(err.err.strip().splitlines()) == 1 and needle in err.err


@pytest.mark.parametrize("updates,needle", [PRESET_CASES[i] for i in (0, 10, 19, 25, 37)])
def test_cli_bad_preset(tmp_path, capsys, updates, needle):
    from roofline.face.cli import main
    rc = main(["transformer", "--model", str(_preset(tmp_path, updates))])
    err = capsys.readouterr()
    assert rc == 2 and err.out == "" and "Traceback" not in err.err
    assert len(err.err.strip().splitlines()) == 1 and needle in err.err


@pytest.mark.parametrize("make,needle", [(lambda d: d / "missing" / "x.json", "does not exist"),
                                         (lambda d: d, "is a folder")])
def test_check_output_refuses_bad_paths(tmp_path, make, needle):
    with pytest.raises(InputError) as e:
        schema.check_output(make(tmp_path), "--trace")
    one_line(e.value, "--trace", needle)


def test_check_output_accepts_a_new_file(tmp_path):
    schema.check_output(tmp_path / "new.json", "--trace")
    assert os.listdir(tmp_path) == []          # checking writes nothing


@pytest.mark.parametrize("x,t,needle", [
    ([1e-3, 1e-3, 1e-3], [2e-3, 2e-3, 2e-3], "1 distinct shape"),       # one shape repeated: any eta fits
    ([1e-3, 2e-3], [2e-3, 4e-3], "2 samples"),
    ([1e-3, 2e-3, 4e-3], [2e-3, NAN, 8e-3], "finite positive"),
])
def test_fit_roofline_refuses_unidentifiable(x, t, needle):
    from roofline.views.calibrate import fit
    x = np.array(x)
    s = fit.Samples(x, x / 10, None, np.array(t))
    with pytest.raises(InputError) as e:
        fit.fit_roofline({"fwd": s})
    one_line(e.value, needle)
