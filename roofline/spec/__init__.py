"""Spec layer: what the user states (Model, Plan), hardware profiles, model presets, training stacks, and the
one resolve/check that turns inputs into a Spec. Imports only base (docs/architecture.md)."""
