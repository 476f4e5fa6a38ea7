"""Base layer: errors, units, the one result shape, value checks, spellings, progress, precisions.

Imports nothing else of roofline (docs/architecture.md)."""
