import os

from sb3_trpo_plus.diagnostics import UpdateDiagnostics
from sb3_trpo_plus.trpo_plus import TRPOPlus

# Read version from file
version_file = os.path.join(os.path.dirname(__file__), "version.txt")
with open(version_file) as file_handler:
    __version__ = file_handler.read().strip()

__all__ = ["TRPOPlus", "UpdateDiagnostics", "__version__"]
