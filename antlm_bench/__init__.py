"""antlm-bench: benchmark pre-training schedules (AntLM and friends) for small language models."""

__version__ = "0.1.0"
