#!/bin/bash
T=/tmp/h61/tune3.sh
$T /work/main/results/amd-epyc/20261207T172546Z-tune rownorm-onepass -- --workload rownorm --variant onepass --size 4096x4096 --target 0.6 --roofs /tmp/h61/roofs-20261206T094017Z.json
$T /work/main/results/amd-epyc/20261207T172546Z-tune gemm-regblock -- --workload gemm --variant regblock --size 512x512x512 --roofs /tmp/h61/roofs-20261206T094017Z.json
echo E-DONE >> /work/main/results/amd-epyc/20261207T172546Z-tune/done.txt
