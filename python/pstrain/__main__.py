"""python3 -m pstrain: the ps-train command."""
import sys

from .cli import main

sys.exit(main())
