"""Small process-level helpers shared by the server roles: log file setup, the /health + /metrics HTTP server."""
