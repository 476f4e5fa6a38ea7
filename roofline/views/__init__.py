"""Views: search, validate, timeline, run-cost, advice, cluster scheduling, sizing, uncertainty, calibration;
pure readers of the model's outputs. Import model, spec and base (docs/architecture.md)."""
