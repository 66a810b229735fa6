"""The package's version: the libzcomm release it binds (configure.ac's
AC_INIT).  A plain literal so that setuptools reads it without importing
the package (pyproject.toml: version = {attr = "zcomm._version.__version__"});
tests/test_python.sh checks it against AC_INIT and zc_get_version()."""
__version__ = "0.1.0"
