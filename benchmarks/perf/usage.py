"""The command line the measurement scripts share: -h/--help prints the script's docstring."""
import sys


def help_or_usage(doc: str, required: int = 0) -> None:
    """Print `doc` and exit 0 on -h/--help; print it to stderr and exit 2 when fewer than
    `required` arguments follow the script's name."""
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(doc.strip())
        sys.exit(0)
    if len(args) < required:
        print(doc.strip(), file=sys.stderr)
        sys.exit(2)
