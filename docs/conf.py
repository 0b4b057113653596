"""
Sphinx configuration of the sb3-trpo-plus documentation (the pages are MyST markdown).

Build it with ``make docs`` (``sphinx-build -W --keep-going -b html docs docs/_build/html``); CI builds it the same way
in ``tests/test_docs.py``, so a warning (a broken cross-reference, a missing page or image) fails the tests.
"""

import os
import sys

# The package is imported from the checkout (autodoc), whether or not it is installed
sys.path.insert(0, os.path.abspath(".."))

with open(os.path.join(os.path.dirname(__file__), "..", "sb3_trpo_plus", "version.txt")) as file_handler:
    __version__ = file_handler.read().strip()

project = "sb3-trpo-plus"
author = "sb3-trpo-plus contributors"
copyright = "2026, sb3-trpo-plus contributors"
version = __version__
release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# MyST: anchors for headings (links such as benchmarks.md#4-breakout-ale), `{include}` of CHANGELOG.md and README.md
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# autodoc: parameters as written in the class docstrings (SB3's `:param name:` style), signature without type noise
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autoclass_content = "class"

html_theme = "sphinx_rtd_theme"
html_title = f"sb3-trpo-plus {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]  # tables wrap instead of being cut off
html_show_sourcelink = False
