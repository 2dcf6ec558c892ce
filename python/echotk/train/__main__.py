"""python -m echotk.train: the same as `python -m echotk train`."""
import sys

from .command import main

sys.exit(main())
