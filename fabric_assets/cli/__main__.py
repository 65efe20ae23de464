"""``python -m fabric_assets.cli`` is ``fabric``."""

from fabric_assets.cli import main

main()
