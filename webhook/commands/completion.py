"""`gpuport completion`: a shell completion script, written from the command line's own parser (every
command and flag) and the shipped cloud maps (the values of --to, --from and --cloud)."""

import argparse
import sys

from webhook.commands.common import Subcommands

CLOUD_FLAGS = ("--to", "--from", "--cloud")


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script: `source <(gpuport completion bash)`, or add that line to "
        "~/.bashrc (zsh: `source <(gpuport completion zsh)` in ~/.zshrc).",
    )
    parser.add_argument("shell", choices=["bash", "zsh"])
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from webhook.config.cloudmap import default_directory, map_files

    clouds = sorted(p.stem for p in map_files(default_directory()))
    # The whole command line comes with the arguments (cli.build_parser puts it there): importing cli
    # here would make the two modules import each other.
    sys.stdout.write(script(args.command_line, clouds, args.shell))
    return 0


def script(parser: argparse.ArgumentParser, clouds: list[str], shell: str) -> str:
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = {
        name: sorted({o for action in sub._actions for o in action.option_strings if o.startswith("--")})
        for name, sub in subcommands.choices.items()
    }
    cases = "\n".join(f'    {name}) opts="{" ".join(flags)}" ;;' for name, flags in sorted(commands.items()))
    body = f"""# gpuport completion ({shell}), written by `gpuport completion {shell}`.
_gpuport() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" opts=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "{" ".join(sorted(commands))} --help --version" -- "$cur"))
    return
  fi
  case "${{COMP_WORDS[1]}}" in
{cases}
  esac
  case "$prev" in
    {"|".join(CLOUD_FLAGS)}) COMPREPLY=($(compgen -W "{" ".join(clouds)}" -- "$cur")); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -F _gpuport gpuport
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body
