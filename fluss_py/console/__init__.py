"""The web console every coordinator serves on its HTTP port (docs/console.md)."""
