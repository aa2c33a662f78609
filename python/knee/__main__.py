import sys

try:
    from knee.cli import entry
except KeyboardInterrupt:  # Ctrl-C while knee itself is still importing
    sys.stderr.write("knee: interrupted\n")
    sys.exit(130)

entry()
