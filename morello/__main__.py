"""``python -m morello`` runs the command line."""
import sys

from morello.cli import main

sys.exit(main())
