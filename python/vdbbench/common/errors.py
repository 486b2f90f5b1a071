"""The usage error: bad input argparse cannot see (unknown index, unwritable directory...)."""


class UsageError(Exception):
    """Bad usage that argparse cannot see: `vdbbench` prints it and exits with code 2."""
