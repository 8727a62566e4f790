"""Hydra plugin: adds ablate's own configs (``pkg://ablate.conf``) to the config search path.

Hydra imports every module under the ``hydra_plugins`` namespace when it looks for plugins, so this
module stays tiny and imports nothing from ablate.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class AblateSearchPathPlugin(SearchPathPlugin):
    """Appends ``pkg://ablate.conf`` (the ``ablate`` primary config, ``ablate_base`` and ``launcher/``)
    after the application's own config dir, so a project's ``conf/`` can shadow any of them."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="ablate", path="pkg://ablate.conf")
