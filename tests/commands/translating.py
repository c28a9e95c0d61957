"""What the `gpuport translate` tests on manifest files share: running the command on a text, the
warnings it says, and an inventory of whole-GPU nodes (so that a platform's own manifest, given the
nodes, is left byte for byte)."""

import yaml

from webhook.commands.cli import main

TRANSLATED_FROM = "gpuport.io/translated-from"
T4_ON_AKS = ["Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3", "Standard_NC16as_T4_v3", "Standard_NC64as_T4_v3"]


def translate(capsys, tmp_path, text, target, *extra):
    """(exit code, stdout, stderr) of `gpuport translate --to target` on `text` written to a file."""
    path = tmp_path / "manifest.yaml"
    path.write_text(text)
    code = main(["translate", "--to", target, str(path), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def warnings(err):
    """The gpuport: lines of stderr, without the file and object they are about."""
    return [line.partition(": gpuport: ")[2] for line in err.splitlines() if ": gpuport: " in line]


def whole_gpu_nodes(tmp_path, label, value):
    """An inventory file of one node of four whole GPUs, carrying `label: value`."""
    path = tmp_path / "nodes.yaml"
    node = {
        "kind": "Node",
        "metadata": {"name": "gpu-node", "labels": {label: value}},
        "status": {"allocatable": {"nvidia.com/gpu": "4"}},
    }
    path.write_text(yaml.safe_dump(node))
    return str(path)
