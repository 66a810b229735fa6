"""Print the directory where `make install` puts the zcomm package for
installation prefix argv[1], as this interpreter will search it: a venv's
own site-packages when the prefix is the venv, else the interpreter's
site directory under the prefix (Debian: /usr/local/lib/python3.X/
dist-packages for /usr/local), else <prefix>/lib/python3.X/site-packages,
which is not on sys.path (exit status 2: the caller says so)."""
import os
import sys
import sysconfig


def main(prefix):
    prefix = os.path.realpath(prefix)
    if sys.prefix != sys.base_prefix and os.path.realpath(sys.prefix) == prefix:
        print(sysconfig.get_path("purelib", "venv" if "venv" in sysconfig.get_scheme_names()
                                 else None))
        return 0
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if (real.startswith(prefix + "/lib/")
                and os.path.basename(real) in ("site-packages", "dist-packages")):
            print(entry)
            return 0
    print(os.path.join(prefix, "lib", "python%d.%d" % sys.version_info[:2], "site-packages"))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
