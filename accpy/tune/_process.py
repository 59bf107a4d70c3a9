"""Entry point of tuning's measuring and building processes: `python -m accpy.tune._process`.

A module of its own, imported by nothing: `python -m accpy.tune.runner` would run a module the
package had already imported (Python warns about that in every such process).
"""
import sys

from accpy.tune.runner import main

if __name__ == "__main__":
    sys.exit(main())
