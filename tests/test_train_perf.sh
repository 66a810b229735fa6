#!/bin/bash
# zc_train_perf's correctness column at a tiny size (python/examples/
# zc_train_perf.py --preset tiny: 2 layers, hidden 32, 768 tokens, one
# iteration, fp32): on 4 forked ranks making 2 emulated nodes, every method
# (te_cp, llama_cp, routing, zeppelin_noremap, zeppelin) on a batch of each
# dataset gives the loss and every parameter gradient of one single-process
# iteration within 1e-4 x max|reference|.  No root, no cluster.  Skips when
# /usr/bin/python3 lacks torch or libzcomm is a sanitizer build.
set -u
srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
. "$srcdir/python_env.sh"
zc_torch_env
exec "$python" "$pydir/examples/zc_train_perf.py" --preset tiny --tap --fork 4 --nodes 2
