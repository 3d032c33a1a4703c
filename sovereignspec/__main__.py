import sys

from sovereignspec.cli.main import main

sys.exit(main())
