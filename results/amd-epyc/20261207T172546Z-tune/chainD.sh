#!/bin/bash
T=/tmp/h61/tune3.sh
$T /work/main/results/amd-epyc/20261207T172546Z-tune gemm-tiled -- --workload gemm --variant tiled --size 512x512x512 --roofs /tmp/h61/roofs-20261206T094017Z.json
$T /work/main/results/amd-epyc/20261207T172546Z-tune attention-flash -- --workload attention --variant flash --size 1x2x512x64 --roofs /tmp/h61/roofs-20261206T094017Z.json
echo D-DONE >> /work/main/results/amd-epyc/20261207T172546Z-tune/done.txt
