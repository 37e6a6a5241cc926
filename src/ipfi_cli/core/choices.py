"""The names in the core's registries of explaining methods (:data:`ipfi_cli.core.explainer.METHODS`),
losses (:data:`ipfi_cli.core.losses.LOSSES`) and sampling strategies
(:data:`ipfi_cli.core.samplers.SAMPLERS`), importable without numpy:
the command line builds its choices from them while ``ipfi --help`` stays fast. A test
checks that they are exactly the registries' keys."""

METHOD_NAMES = ("pfi", "sage")
LOSS_NAMES = ("zero-one", "absolute", "squared", "log", "prediction-shift")
SAMPLING_NAMES = ("geometric", "uniform")
#: :data:`ipfi_cli.core.smoothing.SMOOTHINGS`, :data:`ipfi_cli.core.removal.REMOVALS` (the command line adds
#: ``both``) and :data:`ipfi_cli.core.removal.CONDITIONAL_SAMPLERS`
SMOOTHING_NAMES = ("exponential", "mean")
REMOVAL_NAMES = ("marginal", "conditional")
CONDITIONAL_SAMPLER_NAMES = ("gaussian", "tree")
#: confidence half-width methods (:mod:`ipfi_cli.core.bounds`); the first is the default
BOUNDS_METHODS = ("chebyshev", "normal", "realisations")
#: how SAGE scores the empty coalition (:data:`ipfi_cli.core.sage_game.EMPTY_COALITION`); the first is the default
EMPTY_COALITION_NAMES = ("imputed", "mean")
