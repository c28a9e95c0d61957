import re
import subprocess
import sys

import pytest

from webhook import __version__
from webhook.commands.cli import build_parser, main


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args], capture_output=True, text=True, check=False
    )


def test_version():
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"gpuport {__version__}"


@pytest.mark.parametrize(
    "command",
    [
        "serve",
        "certs",
        "translate",
        "lint",
        "preflight",
        "plan",
        "usage",
        "node-agent",
        "explain",
        "registration",
        "completion",
    ],
)
def test_every_subcommand_has_help(command):
    result = run(command, "--help")
    assert result.returncode == 0
    assert f"usage: gpuport {command}" in result.stdout


def test_serve_flags_parse():
    args = build_parser().parse_args(
        [
            "serve",
            "--bind",
            "127.0.0.1:9443",
            "--cert-dir",
            "/c",
            "--cloud",
            "gke",
            "--workers",
            "3",
            "--threads",
            "2",
        ]
    )
    assert (args.bind, str(args.cert_dir), args.cloud, args.workers, args.threads) == (
        "127.0.0.1:9443",
        "/c",
        "gke",
        3,
        2,
    )


def test_serve_without_certificates_says_how_to_make_them(tmp_path, capsys):
    assert main(["serve", "--cert-dir", str(tmp_path)]) == 2
    assert f"create it with `gpuport certs --out {tmp_path}`" in capsys.readouterr().err


def test_serve_with_an_unknown_cloud_names_the_known_ones(tmp_path, capsys):
    from tests.server_process import make_certs

    make_certs(tmp_path)
    assert main(["serve", "--cert-dir", str(tmp_path), "--cloud", "mars"]) == 2
    err = capsys.readouterr().err
    assert "no cloud map named 'mars'" in err and "generic" in err


def test_serve_with_a_broken_cloud_map_names_file_and_line(tmp_path, capsys):
    from tests.server_process import make_certs

    make_certs(tmp_path / "tls")
    import shutil

    from webhook.config.cloudmap import default_directory

    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    (maps / "generic.yaml").write_text("name: generic\nresources:\n  whole: 7\n")
    assert main(["serve", "--cert-dir", str(tmp_path / "tls"), "--cloudmap-dir", str(maps)]) == 2
    assert f"{maps / 'generic.yaml'}:3: resources.whole" in capsys.readouterr().err


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "commands" in capsys.readouterr().out


def test_serve_with_a_broken_inventory_says_which_file(tmp_path, capsys):
    from tests.server_process import make_certs

    make_certs(tmp_path)
    (tmp_path / "nodes.yaml").write_text("kind: List\nitems: []\n")
    assert main(["serve", "--cert-dir", str(tmp_path), "--inventory", str(tmp_path / "nodes.yaml")]) == 2
    assert (
        f"inventory {tmp_path / 'nodes.yaml'}: the inventory holds no Node objects" in capsys.readouterr().err
    )


def test_building_the_parser_imports_no_server_cluster_or_gpu_library():
    # Every command module is loaded to build the parser: a top-level import of gunicorn, flask,
    # kubernetes or NVML there would slow every command and pull a web server into the node agent.
    probe = (
        "import sys; from webhook.commands.cli import build_parser; build_parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'gunicorn', 'flask', 'kubernetes', 'pynvml', 'prometheus_client', 'ruamel'}))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_an_inventory_file_with_a_broken_agent_record_names_the_node(tmp_path, capsys):
    # A file the user gave: the problem is theirs to fix, so it is an error (the webhook's live view
    # reads such a node without its record instead).
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "kind: Node\nmetadata:\n  name: gpu-1\n  annotations:\n    gpuport.io/capability: '[1]'\n"
        "status:\n  allocatable:\n    nvidia.com/gpu: '8'\n"
    )
    pod = tmp_path / "pod.yaml"
    pod.write_text("kind: Pod\napiVersion: v1\nmetadata:\n  name: p\nspec:\n  containers: []\n")
    assert main(["translate", "--to", "generic", "--inventory", str(nodes), str(pod)]) == 2
    assert (
        f"inventory {nodes}: node gpu-1: gpuport.io/capability is not a JSON object"
        in capsys.readouterr().err
    )


def test_the_kinds_translate_reads_name_a_group_where_the_bare_kind_would_mislead():
    from webhook.commands.common import kinds_read

    listed = kinds_read().split(", ")
    assert "Service (serving.knative.dev)" in listed and "Service" not in listed  # not a core Service
    assert "Deployment" in listed and "Job" in listed and "Job (batch.volcano.sh)" in listed


class _Recording(dict):
    """An environment that remembers every variable asked of it."""

    def __init__(self):
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.asked.add(key)
        return super().__contains__(key)


def test_serve_help_names_every_environment_variable_the_settings_read(capsys):
    from webhook.adapters.http.settings import Settings

    environ = _Recording()
    Settings.from_env(environ)
    read = environ.asked | set(Settings().to_env())
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = capsys.readouterr().out
    assert read, "the settings read no variable at all"
    assert sorted(v for v in read if v not in shown) == []


def test_serve_s_boot_lines_carry_the_format_of_every_later_line(tmp_path):
    # What a worker logs while it loads the app (a refused DeviceClass list, an undiscovered API
    # version) went through Python's last-resort handler: the bare message. It must read like the rest.
    from tests.server_process import make_certs

    make_certs(tmp_path)
    probe = (
        "import logging, sys\n"
        "from pathlib import Path\n"
        "from webhook.adapters.http.settings import Settings\n"
        "from webhook.commands import serve\n"
        "class Booting:\n"
        "    def run(self):\n"
        "        logging.getLogger('gpuport.dra').warning('a boot line')\n"
        "serve._gunicorn_application = lambda settings: Booting()\n"
        "sys.exit(serve.serve(Settings(cert_dir=Path(sys.argv[1]))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True, timeout=60
    )

    line = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"\[[-0-9 :+]+\] \[\d+\] \[WARNING\] gpuport\.dra: a boot line", line), line
