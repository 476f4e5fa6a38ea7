"""stacks.infer: a row that names no stack and shows no 2023+ feature gets the Megatron-LM of its source's date."""
from roofline.spec import stacks


def test_unnamed_old_run_takes_the_megatron_lm_of_its_year():
    # no alias in the text, fp16 on Ampere, GPT-style MHA: the era rule; the arXiv id dates the code
    s, why = stacks.infer(text="Some et al. arXiv:2205.05198 Table 5", dtype="fp16")
    assert s.id == "megatron-lm-2022" and "2022" in why
    s, _ = stacks.infer(text="A 2021 run", dtype="fp16")
    assert s.id == "megatron-lm-2021"
    s, why = stacks.infer(text="no date here", dtype="fp16")
    assert s.id == "megatron-lm-2021" and why.startswith("era rule")
