"""Module cases by family (``MODULE_CASES`` in each module); see ``tests/nn/module_cases.py``."""
