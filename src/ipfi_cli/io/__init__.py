"""Streaming readers, flushed trace writers and model files. No CLI or display imports."""
