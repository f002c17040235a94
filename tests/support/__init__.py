"""What the tests share, none of it a test: the independent NumPy oracles
(``oracles*``), the stack checks (``stack``), the graph/XLA harness
(``loss_modes``), a linear scorer (``scorers``), small LibSVM files
(``libsvm_files``) and the multi-worker helpers
(``local_cluster``, ``pipeline_worker_job``). Imported as ``support.<module>``
(``tests/`` is on ``sys.path``, ``tests/conftest.py``)."""
