import sys

from light_llm.cli import main

sys.exit(main())
