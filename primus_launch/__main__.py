import sys

from primus_launch.cli import main

sys.exit(main())
