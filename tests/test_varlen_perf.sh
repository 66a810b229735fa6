#!/bin/bash
# zc_varlen_perf's #wrong column at a small size (python/examples/
# zc_varlen_perf.py: 3000 tokens of every dataset and of random lengths,
# every method, one iteration): on 4 forked ranks making 2 emulated nodes,
# dispatch, undispatch, to_linear and from_linear put every row where the
# layout says.  No root, no cluster.  Skips when /usr/bin/python3 lacks
# torch or libzcomm is a sanitizer build.
set -u
srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
. "$srcdir/python_env.sh"
zc_torch_env
exec "$python" "$pydir/examples/zc_varlen_perf.py" --tokens 3000 --iters 1 --warmup 0 --tap \
    --fork 4 --nodes 2
