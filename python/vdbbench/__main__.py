import sys

from vdbbench.cli import main

sys.exit(main())
