#!/bin/sh
# The layers of README's "Layers" section: includes and calls between the
# library's files go to the same layer or below, and no files call each
# other in a circle (tests/check_layers.py; run from the build directory,
# where the library's objects are).
top=${ZC_TEST_SRCDIR:-$(dirname "$0")}/..
exec python3 "$top/tests/check_layers.py" "$top" "$(pwd)"
