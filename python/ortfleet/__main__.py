"""`python -m ortfleet ARGS` runs the ortfleet command line shipped inside the package."""
import os
import sys


def main() -> None:
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "ortfleet")
    if not os.access(exe, os.X_OK):
        sys.exit(f"ortfleet: the command-line program is missing from the package ({exe}); reinstall ortfleet")
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
