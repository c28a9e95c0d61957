"""Render cloudmaps/*.yaml as the gpuport-cloudmaps ConfigMap in manifests/.

kustomize refuses files outside its folder, so the base carries a rendered copy; `make manifests`
rewrites it and a test fails when it is out of date. Usage: python -m webhook.config.cloudmap_configmap
"""

import sys
from pathlib import Path

import yaml

from webhook.config.cloudmap import default_directory

CONFIGMAP_NOTICE = (
    "# Generated from cloudmaps/ by `make manifests`; edit the files there, or this ConfigMap in a cluster.\n"
)


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings as literal blocks, so the ConfigMap reads like the files it holds."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def render(directory: Path) -> str:
    data = {path.name: path.read_text(encoding="utf-8") for path in sorted(directory.glob("*.yaml"))}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpuport-cloudmaps"},
        "data": data,
    }
    return CONFIGMAP_NOTICE + yaml.dump(configmap, Dumper=_BlockDumper, sort_keys=False, width=1000)


if __name__ == "__main__":
    sys.stdout.write(render(Path(sys.argv[1]) if len(sys.argv) > 1 else default_directory()))
