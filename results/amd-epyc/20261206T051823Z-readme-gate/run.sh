# the README's two-session gate, under a busy loop on one core
set -u
cd /tmp/gate
py=/work/main/.venv/bin/python
rm -rf base new slow
python3 -c 'while 1: pass' & busy=$!
echo "start $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
$py -m pytest -q -p no:cacheprovider test_add.py --roofline-out base > base.log 2>&1; echo "base rc $?"
$py -m pytest -q -p no:cacheprovider test_add.py --roofline-out new > new.log 2>&1; echo "new rc $?"
SLOW=2 $py -m pytest -q -p no:cacheprovider test_add.py --roofline-out slow > slow.log 2>&1; echo "slow rc $?"
$py -m roofbench.bench.cli compare base new --fail-on slower:5% > cmp_same.log 2>&1; echo "compare base new rc $?"
$py -m roofbench.bench.cli compare base slow --fail-on slower:5% > cmp_slow.log 2>&1; echo "compare base slow rc $?"
kill $busy
echo "end $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
