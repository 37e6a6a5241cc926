"""ipfi: incremental permutation feature importance for models on data streams.

The package is layered so that each layer only imports the ones below it:

* ``ipfi_cli.core``   - the pure estimators (iPFI, batch and interval PFI), samplers, losses
* ``ipfi_cli.models`` - adapters that give scikit-learn, river and plain callables one interface
* ``ipfi_cli.io``     - streaming readers and flushed writers
* ``ipfi_cli.cli``    - the Typer application ``ipfi``

Importing this package is cheap: nothing heavy is imported until it is used.
"""

__version__ = "0.1.0"
