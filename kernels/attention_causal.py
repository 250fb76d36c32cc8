"""attention_causal: attention with the causal mask (query i sees keys 0..i), a workload of its
own because the float64 reference, which every variant shares, must know the mask. Kernels,
accounting and sizes are kernels/attention.py's; only the scores on or below the diagonal
count (N(N+1)/2 per head)."""

from __future__ import annotations

from .attention import workload

WORKLOAD = workload(causal=True)
