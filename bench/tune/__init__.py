"""`roofbench tune`: a kernel's configurations searched, each validated, timed with paired
roof samples and placed, until the roof says there is nothing left to win (docs/tune.md).

``space.py`` (the declared space), ``search.py`` (the loop and its stop rules),
``measured.py`` (one configuration measured and placed, a screen counted in its timing),
``record.py`` (the frozen record), ``output.py`` (its files), ``triton_autotune.py`` (a
drop-in for ``triton.autotune``)."""
