"""Model layer: the sympy formulas (the single source of truth), their compiled numpy form, and predict.
Imports spec and base (docs/architecture.md)."""
