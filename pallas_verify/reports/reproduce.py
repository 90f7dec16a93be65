"""Where reproducer scripts written before replay moved to ``campaigns.replay`` import
``reproduce`` from: they keep running. Nothing in the package imports this module (the
scripts are written by ``reports.reproducer``), so this one upward import (a report
module naming a campaign's) is no edge of the package's import graph that anything walks.
"""

from pallas_verify.campaigns.replay import reproduce
from pallas_verify.exits import EXIT_CANNOT_RUN, EXIT_FIXED, EXIT_REPRODUCES

__all__ = ["EXIT_CANNOT_RUN", "EXIT_FIXED", "EXIT_REPRODUCES", "reproduce"]
