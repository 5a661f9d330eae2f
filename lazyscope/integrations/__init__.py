"""Where users already work: a notebook (:mod:`lazyscope.integrations.jupyter`, the
``%%lazyscope`` cell magic) and Hugging Face's ``Trainer``
(:mod:`lazyscope.integrations.transformers`, ``LazyscopeCallback``). Each imports its host
library (IPython, transformers) only when used, so ``import lazyscope`` needs neither."""
