"""Stand-in for the vLLM package (test world only): same CLI, same endpoints, no GPU, no network."""
__version__ = "0.27.1"
