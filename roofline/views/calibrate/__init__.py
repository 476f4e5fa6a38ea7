"""Calibration: fit the roofline efficiencies and alpha-beta link parameters from measured samples.

- ``fit``: robust least-squares fits (scipy), k-fold held-out error, outlier flags, nccl-tests
  bandwidth conversions. Pure functions on numpy arrays.
- ``importers``: external sample data (estimate-train-time CSVs, nccl-tests tables) -> samples,
  with the known data defects detected and reported.
- ``bench_compute`` / ``bench_comm``: torch microbenchmarks (torch imported lazily).
- ``profile``: samples -> fitted profile YAML.
- ``cli``: the ``roofline calibrate`` subcommand.
"""
