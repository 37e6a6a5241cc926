"""The run layer: what a command does with rows between the reader and the core.

Nothing here imports Typer or Rich. :mod:`~ipfi_cli.run.labels` matches labels to the
model and refuses losses that cannot measure it; :mod:`~ipfi_cli.run.rows` checks rows
(labels, model inputs, unusable values) with one rule for every command, and reads a
whole input for the batch commands; :mod:`~ipfi_cli.run.failures` finds the row and
column a model failed on; :mod:`~ipfi_cli.run.explain` is the streaming session of
``ipfi explain``, which reports to the observers of :mod:`~ipfi_cli.run.observers` and is given
its collaborators: the strategy that turns rows into records (:mod:`~ipfi_cli.run.explaining`,
:mod:`~ipfi_cli.run.keyed` with ``--by``) and the run's end (:mod:`~ipfi_cli.run.ending`).
"""
