"""FastAPI control plane and dashboard for Phalanx."""
