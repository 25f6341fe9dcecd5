"""Flower ClientApp and worker behaviours for Phalanx."""
