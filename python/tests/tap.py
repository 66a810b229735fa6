"""Minimal TAP for the Python tests: ok(cond, name, diag), then done()."""
import sys

_count = 0
_failed = 0


def ok(cond, name, diag=""):
    global _count, _failed
    _count += 1
    if not cond:
        _failed += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", _count, name))
    if not cond and diag:
        for line in str(diag).splitlines():
            print("# " + line)
    sys.stdout.flush()


def raises(fn, name, status_name, detail_has):
    """ok() when fn() raises ZcommError `status_name` whose detail contains
    `detail_has`."""
    import zcomm
    try:
        fn()
    except zcomm.ZcommError as e:
        ok(e.name == status_name and detail_has in e.detail, name,
           "got %s: %s" % (e.name, e.detail))
        return
    except Exception as e:  # a wrong exception type fails the case
        ok(False, name, "raised %s: %s" % (type(e).__name__, e))
        return
    ok(False, name, "no exception")


def done():
    print("1..%d" % _count)
    return 1 if _failed else 0
