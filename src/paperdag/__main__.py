import sys

from paperdag.engine.cli import main

sys.exit(main())
