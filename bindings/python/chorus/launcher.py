"""The `chorusrun` command of a pip-installed Chorus: runs the launcher binary shipped in the
package (chorus/bin/chorusrun) with the same arguments."""
import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "chorusrun")
    if not os.access(binary, os.X_OK):
        sys.exit("chorusrun: %s is missing: this chorus package was not installed with `pip install .`"
                 % binary)
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    main()
