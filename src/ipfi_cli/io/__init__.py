"""Bytes in and out: the one streaming reader (sources, values, rows, blocks), the trace and record
writers beside it (CSV, JSONL, Parquet), the state file, spilled keys, labels files, and the wire
formats of metrics and webhooks. No CLI or display imports; model files are :mod:`ipfi_cli.models`'s."""
