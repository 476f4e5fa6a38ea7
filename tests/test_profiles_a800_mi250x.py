"""Two datasheet profiles for hardware the validation files do not hold: the A800 (the A100 with NVLink cut to 400 GB/s)
and one GCD of the AMD MI250X (a package is two devices)."""
import pytest

from roofline.model.predict import predict
from roofline.spec import hardware, models
from roofline.spec.config import Plan

GiB = 2 ** 30


def _t(gpu, **plan):
    return predict(models.load("llama3-8b"), Plan(global_batch=16, **plan), hardware.load(gpu)).raw


def test_a800_computes_as_the_a100_and_communicates_slower():
    a800, a100 = hardware.load("a800-sxm4-80gb"), hardware.load("a100-sxm4-80gb")
    assert a800.peak("bf16") == a100.peak("bf16") and a800.hbm_bandwidth == a100.hbm_bandwidth
    one800, one100 = _t("a800-sxm4-80gb", micro_batch=2), _t("a100-sxm4-80gb", micro_batch=2)
    assert one800["step_time"] == pytest.approx(one100["step_time"], rel=1e-12)   # one GPU: no collective
    tp800, tp100 = _t("a800-sxm4-80gb", tp=8, micro_batch=2), _t("a100-sxm4-80gb", tp=8, micro_batch=2)
    assert tp800["t_tp_comm"] > tp100["t_tp_comm"] and tp800["step_time"] > tp100["step_time"]


def test_mi250x_is_one_gcd_half_the_package():
    g = hardware.load("mi250x")
    assert g.peak("bf16") == pytest.approx(383e12 / 2)
    assert g.hbm_bandwidth == pytest.approx(3.2e12 / 2)
    assert g.hbm_capacity == pytest.approx(128 / 2 * GiB)
    assert g.gpus_per_node == 8                                  # 4 packages per Frontier node
    with pytest.raises(Exception, match="fp8"):
        g.peak("fp8")                                            # CDNA 2 has no FP8


@pytest.mark.parametrize("name,pid", [
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"), ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
    ("AMD Instinct MI250X", "mi250x"), ("AMD Instinct MI300X", "mi300x"), ("NVIDIA GH200 480GB", "gh200"),
    ("h100_sxm", "h100-sxm"), ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"), ("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"),
    ("AMD Instinct MI325X", "mi325x"), ("NVIDIA H20", "h20"), ("NVIDIA H200", "h200"),
    ("NVIDIA H100 NVL", "h100-nvl"), ("NVIDIA H200 NVL", "h200-nvl"), ("AMD Instinct MI355X", "mi355x"),
])
def test_device_names_as_the_driver_prints_them_find_their_profile(name, pid):
    assert hardware.load(name).id == pid


def test_an_ambiguous_short_name_names_the_candidates():
    from roofline.base.errors import InputError

    with pytest.raises(InputError, match=r"'H100' could be any of .*h100-pcie.*h100-sxm"):
        hardware.load("H100")
    with pytest.raises(InputError, match="unknown GPU/hardware profile 'tpu-v4'"):
        hardware.load("tpu-v4")


def test_a_short_name_matches_ids_that_extend_it_at_a_separator_only():
    """'b20' is not b200, 'mi250' not mi250x: a longer part number is another part."""
    from roofline.base.errors import InputError

    for name in ("b20", "mi250"):
        with pytest.raises(InputError, match=f"unknown GPU/hardware profile '{name}'"):
            hardware.load(name)
    with pytest.raises(InputError, match=r"'v100' could be any of v100-sxm2-16gb, v100-sxm2-32gb, v100-sxm3-32gb"):
        hardware.load("v100")


@pytest.mark.parametrize("text,pid", [
    ("V100 (16 GB)", "v100-sxm2-16gb"), ("Tesla V100 16GB", "v100-sxm2-16gb"), ("DGX-2H (V100)", "v100-sxm3-32gb"),
    ("V100 PCIe 16GB", None), ("V100", None), ("V100 32GB", None)])
def test_v100_texts_name_their_part_or_none(text, pid):
    """A 16 GB V100 is an SXM2 part unless it says PCIe (no profile); DGX-2 nodes carry SXM3; a V100 without its
    memory or form factor names no one part."""
    assert hardware.from_text(text) == pid


def test_a_bare_v100_in_a_table_reads_as_the_dgx1_sxm2_32gb_part_and_says_so():
    for text in ("V100", "512 V100 GPUs", "V100 32GB"):
        pid, why = hardware.bare_part(text)
        assert pid == "v100-sxm2-32gb" and "16GB, SXM3 or DGX-2" in why
    assert hardware.bare_part("V100 PCIe") is None and hardware.bare_part("V100 16GB") is None
    assert hardware.bare_part("DGX-2 V100") is None


def test_dgx2_v100_profile():
    """DGX-2: 16 V100 SXM3 32GB on NVSwitch (one NVLink domain of 16), fp16 tensor cores at 2 PFLOPS / 16."""
    h = hardware.load("Tesla V100-SXM3-32GB")
    assert h.id == "v100-sxm3-32gb" and h.gpus_per_node == 16
    assert h.peak("fp16") == pytest.approx(125e12) and h.peak_flops.get("bf16") is None


def test_a_pcie_part_never_reads_as_the_sxm_one():
    """'A100-PCIE-40GB' (the driver's name) once matched the SXM4 40 GB profile: the PCIe test ran only after '40g'."""
    assert hardware.from_text("A100-PCIE-40GB") == "a100-pcie-40gb"
    assert hardware.from_text("NVIDIA A100 PCIe 80GB") == "a100-pcie-80gb"
    assert hardware.from_text("A100 40GB SXM4") == "a100-sxm4-40gb"
    assert hardware.load("a100-pcie-40gb").intra.kind == "pcie"


def test_the_new_datasheet_parts_inherit_what_they_share():
    p40, p80 = hardware.load("a100-pcie-40gb"), hardware.load("a100-pcie-80gb")
    assert p40.peak("bf16") == p80.peak("bf16") and p40.hbm_capacity == 40 * GiB and p40.hbm_bandwidth == 1555e9
    m325, m300 = hardware.load("mi325x"), hardware.load("mi300x")
    assert m325.peak("bf16") == m300.peak("bf16") and m325.hbm_capacity == 256 * GiB and m325.hbm_bandwidth == 6e12
    h20 = hardware.load("h20")
    assert h20.peak("bf16") == pytest.approx(148e12) and h20.peak("fp8") == pytest.approx(296e12)
    assert h20.attention_factor("cudnn", 128) == hardware.load("h100-sxm").attention_factor("cudnn", 128)
    # a sixth of H100's compute: the same step takes longer on it
    assert _t("h20", micro_batch=2)["step_time"] > _t("h100-sxm", micro_batch=2)["step_time"]


@pytest.mark.parametrize("text,pid", [
    ("H20 96GB", "h20"),               # the memory size once read as part of the part number (h2096gb)
    ("H200 NVL 141GB", "h200-nvl"), ("H100 94GB NVL", "h100-nvl"), ("H100-NVL", "h100-nvl"),
    ("GB200 NVL72", "gb200"), ("GB300 NVL72", "gb300"), ("H200 SXM 141GB", "h200"),
    ("GH200 (JUPITER Booster)", "gh200-quad"), ("CSCS Alps GH200", "gh200-quad"), ("NVIDIA GH200 480GB", "gh200"),
])
def test_variant_text_finds_its_own_part(text, pid):
    assert hardware.from_text(text) == pid


def test_nvl_cards_compute_below_the_sxm_part_and_talk_over_pcie():
    """H100 NVL / H200 NVL: the GH100 on a PCIe card (835 TFLOP/s dense bf16, half the datasheets' 1,671 with
    sparsity); their NVLink bridges join only 2-4 cards, so collectives inside an 8-GPU server go over PCIe."""
    nvl, h200nvl, sxm = hardware.load("h100-nvl"), hardware.load("h200-nvl"), hardware.load("h100-sxm")
    assert nvl.peak("bf16") == pytest.approx(835e12) and nvl.peak("fp8") == pytest.approx(1671e12)
    assert h200nvl.hbm_capacity == pytest.approx(141 * GiB) and h200nvl.hbm_bandwidth > nvl.hbm_bandwidth
    assert nvl.intra.kind == "pcie" and nvl.intra.bandwidth < sxm.intra.bandwidth
    assert _t("h100-nvl", micro_batch=2)["step_time"] > _t("h100-sxm", micro_batch=2)["step_time"]
    assert _t("h100-nvl", tp=8, micro_batch=2)["t_tp_comm"] > _t("h100-sxm", tp=8, micro_batch=2)["t_tp_comm"]


def test_mi355x_doubles_cdna3_matrix_rate_per_clock():
    """MI355X: 256 CUs x 8,192 FP8 FLOP per clock x 2.4 GHz; bf16 half of that; faster than MI300X on one GPU."""
    g = hardware.load("mi355x")
    assert g.peak("fp8") == pytest.approx(256 * 8192 * 2.4e9, rel=1e-3)
    assert g.peak("bf16") == pytest.approx(g.peak("fp8") / 2)
    assert g.hbm_capacity == pytest.approx(288 * GiB)
    assert _t("mi355x", micro_batch=2)["step_time"] < _t("mi300x", micro_batch=2)["step_time"]


@pytest.mark.parametrize("card,family", [("h100-pcie", "h100-sxm"), ("h100-nvl", "h100-sxm"), ("h200-nvl", "h100-sxm"),
                                         ("a100-pcie-80gb", "a100-sxm4-80gb"), ("a100-pcie-40gb", "a100-sxm4-80gb"),
                                         ("gh200", "h100-sxm"), ("gh200-quad", "h100-sxm")])
def test_pcie_cards_take_their_familys_curves_not_the_flat_default(card, family):
    """A PCIe card of a calibrated family (Hopper, Ampere) prices its kernels on that family's curves, as fractions of
    its own peak: the same efficiency at every shape (below its own matmul ceiling), never the flat 0.8 of defaults.yaml."""
    c, f = hardware.load(card), hardware.load(family)
    for cls in ("attn", "bmm"):
        assert c.efficiency[cls]["fwd"][1:] == f.efficiency[cls]["fwd"][1:]
    assert c.efficiency["gemm"]["fwd"][0] <= f.efficiency["gemm"]["fwd"][0] + 1e-12
    assert c.efficiency["gemm"]["fwd"][0] != 0.8
    assert c.sustained_clock == f.sustained_clock


def test_quad_gh200_nodes_keep_tp_inside_the_node_and_talk_slower_across():
    """JUPITER Booster / Alps: four GH200 per node, NVLink 4 150 GB/s per direction to each of 3 peers, one 200 Gb/s
    NIC per GPU. TP 4 stays on NVLink there; on the one-per-node gh200 profile it crosses the network."""
    quad, one = hardware.load("gh200-quad"), hardware.load("gh200")
    assert quad.gpus_per_node == 4 and quad.intra.bandwidth == pytest.approx(3 * 150e9)
    assert quad.inter.bandwidth == pytest.approx(25e9) and quad.peak("bf16") == one.peak("bf16")
    assert _t("gh200-quad", tp=4, micro_batch=2)["t_tp_comm"] < _t("gh200", tp=4, micro_batch=2)["t_tp_comm"]
