"""The names in the core's registries of explaining methods (:data:`ipfi_cli.core.explainer.METHODS`),
losses (:data:`ipfi_cli.core.losses.LOSSES`) and sampling strategies
(:data:`ipfi_cli.core.samplers.SAMPLERS`), importable without numpy:
the command line builds its choices from them while ``ipfi --help`` stays fast. A test
checks that they are exactly the registries' keys."""

METHOD_NAMES = ("pfi",)
LOSS_NAMES = ("zero-one", "absolute", "squared", "log")
SAMPLING_NAMES = ("geometric", "uniform")
