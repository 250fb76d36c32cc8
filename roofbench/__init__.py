"""roofbench: GPU kernel micro-benchmarks on the Roofline model.

The code lives in three folders installed under this one import name:
``roofbench.kernels`` (what is measured), ``roofbench.roofs`` (what the hardware can do) and
``roofbench.bench`` (how it is measured and shown).
"""

__version__ = "0.1.0"
