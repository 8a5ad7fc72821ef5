"""edge-agent: an offline assistant daemon."""
__version__ = "0.1.0"
