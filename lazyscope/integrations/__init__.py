"""Where users already work: a notebook (:mod:`lazyscope.integrations.jupyter`, the
``%%lazyscope`` cell magic), Hugging Face's ``Trainer``
(:mod:`lazyscope.integrations.transformers`, ``LazyscopeCallback``), pytest
(:mod:`lazyscope.integrations.pytest_plugin`, the ``@pytest.mark.lazyscope`` marker) and the
program itself (:mod:`lazyscope.integrations.live`: ``lazyscope.guard`` and the live alerts of
``lazyscope trace``). Each imports its host library (IPython, transformers, pytest) only when
used, so ``import lazyscope`` needs none of them."""
