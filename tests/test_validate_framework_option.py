"""`validate --framework STACK`: the stack of the rows that name none (a user's own runs, a pasted table), as if each
row named it; a row naming its own framework keeps it; an unknown stack is one line and exit 2."""
import csv
import json

COLS = ["case_id", "source", "framework", "model", "gpu_id", "n_gpus", "gpus_per_node", "seq_len", "global_batch",
        "micro_batch", "tp", "pp", "dp", "precision", "measured_iter_time_s", "tier"]


def _file(tmp_path):
    base = {"source": "our cluster, 2024", "model": "GPT-3 6.7B", "gpu_id": "h100-sxm", "n_gpus": "64",
            "gpus_per_node": "8", "seq_len": "2048", "global_batch": "512", "micro_batch": "8", "tp": "1", "pp": "1",
            "dp": "64", "precision": "BF16", "measured_iter_time_s": "3.0", "tier": "A"}
    path = tmp_path / "runs.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLS)
        w.writeheader()
        w.writerow({**base, "case_id": "blank", "framework": ""})
        w.writerow({**base, "case_id": "own", "framework": "torchtitan"})
    return path


def test_rows_without_a_framework_take_the_option(tmp_path, cli_main):
    path = _file(tmp_path)
    plain = {c["case_id"]: c for c in json.loads(cli_main("validate", path, "--json").stdout)["cases"]}
    pax = {c["case_id"]: c for c in json.loads(cli_main("validate", path, "--json", "--framework", "paxml").stdout)["cases"]}
    assert plain["blank"]["framework"] != "paxml" and pax["blank"]["framework"] == "paxml"
    assert plain["own"]["framework"] == pax["own"]["framework"] == "torchtitan-2024"      # its 2024 source dates it
    assert pax["blank"]["predicted_s"] != plain["blank"]["predicted_s"]     # Pax's FSDP and remat, not the era stack's


def test_an_unknown_framework_is_one_line(tmp_path, cli_main):
    r = cli_main("validate", _file(tmp_path), "--framework", "no-such-stack")
    assert r.returncode == 2 and "unknown framework 'no-such-stack'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout
