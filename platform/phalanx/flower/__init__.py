"""Flower adapters: the ServerApp, its Grid transport, and a drop-in robust strategy."""
