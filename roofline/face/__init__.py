"""Face: the command line and the generated docs. Imports every layer below (docs/architecture.md)."""
