import sys

from .face.cli import main

sys.exit(main())
