"""Hydra's own errors (an unknown option, key or plugin, an override it cannot parse) as one
``error:`` line and exit code 2, like every other mistake on the command line (``errors.py``).

Hydra reports these in 7-12 lines ending with "Set the environment variable
HYDRA_FULL_ERROR=1 for a complete stack trace." and exits 1. ``run(app)`` runs the Hydra app
with that variable set, so Hydra raises the exception instead of printing it, and turns the
exceptions of *reading the command line and composing the config* into one line:

    net=mlp999           error: net=mlp999: net has no option mlp999; choose one of mlp100, mlp128, mlp25
    budget.game=5        error: budget.game is not a key of the config; did you mean budget.games=5?
    hydra/launcher=joblib (plugin missing)
                         error: hydra/launcher=joblib needs the Hydra plugin hydra-joblib-launcher,
                         which is not installed: pip install 'ttt_research[sweeps]'

Anything raised once the job runs stays what it was: our own refusals are already one line
(``__main__.refuse``), and anything else is a bug that keeps its traceback. A user who sets
``HYDRA_FULL_ERROR=1`` gets Hydra's full report, untouched. Standard library, Hydra,
OmegaConf, ``errors.clipped`` (a long value cut) and ``files.atomic``'s words for a disk's
errors only: nothing here loads torch.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import sys
from collections.abc import Callable

from ttt_research.errors import clipped
from ttt_research.files.atomic import describe_os_error

FULL = "HYDRA_FULL_ERROR"
# Set beside FULL when we set it: a process started from this one (DDP's other ranks rerun the
# command) inherits both and knows that FULL was ours, not the user's.
OURS = "TTT_RESEARCH_ONE_LINE_ERRORS"

# Hydra plugins by (group, option): the package that provides the option and this project's
# extra that installs it (None: not one of our extras).
PLUGINS: dict[tuple[str, str], tuple[str, str | None]] = {
    ("hydra/launcher", "joblib"): ("hydra-joblib-launcher", "sweeps"),
    ("hydra/launcher", "submitit_slurm"): ("hydra-submitit-launcher", "slurm"),
    ("hydra/launcher", "submitit_local"): ("hydra-submitit-launcher", "slurm"),
    ("hydra/launcher", "ray"): ("hydra-ray-launcher", None),
    ("hydra/launcher", "rq"): ("hydra-rq-launcher", None),
    ("hydra/sweeper", "optuna"): ("hydra-optuna-sweeper", "sweeps"),
    ("hydra/sweeper", "ax"): ("hydra-ax-sweeper", None),
    ("hydra/sweeper", "nevergrad"): ("hydra-nevergrad-sweeper", None),
}
# Our own configs in those groups that stand on a plugin's (conf/hydra/launcher/slurm.yaml).
OURS_ON_PLUGINS = {"hydra/launcher/slurm": "hydra/launcher=slurm"}
# Hydra's messages raised as plain ValueErrors ("=3"; two of --cfg, -m, ...).
HYDRA_VALUE_ERRORS = ("Config group override", "Only one of --run", "The --resolve flag")
GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic/"


def user_wants_full_report() -> bool:
    """HYDRA_FULL_ERROR=1 set by the user (not by ``run`` in a parent process)."""
    return os.environ.get(FULL) == "1" and os.environ.get(OURS) != "1"


def run(app: Callable[[], object], argv: list[str] | None = None) -> None:
    """Run the Hydra ``app``; Hydra's own errors become one ``error:`` line and exit 2."""
    if user_wants_full_report():
        app()
        return
    check_flags(sys.argv[1:] if argv is None else argv)
    saved = {k: os.environ.get(k) for k in (FULL, OURS)}
    os.environ[FULL] = os.environ[OURS] = "1"
    try:
        app()
    except Exception as e:
        if (stop := interrupted_by(e)) is not None:
            raise stop from None
        line = one_line(e, overrides(sys.argv[1:] if argv is None else argv))
        if line is None:
            raise  # a bug: its traceback, as ever
        print(f"error: {line}", file=sys.stderr)
        sys.exit(2)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def interrupted_by(error: BaseException) -> BaseException | None:
    """The stop (``KeyboardInterrupt``, ``early_stop.StoppedEarly``: a ``BaseException`` that is
    no ``Exception``) that ``error`` was raised while handling, None if none. A signal's exception
    raised inside a library's ``try`` before its ``finally`` had what it cleans up (Hydra's
    config reader: ``f.close()`` before ``f`` was set) comes back as that library's own error,
    the stop only its context: the stop is what happened."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if not isinstance(error, Exception):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


# Hydra's flags that take no value: where a user puts one after an override (``debug=tiny -m
# seed=0,1``), Hydra's parser stops at it and refuses the rest in a usage text that echoes it whole.
BARE_FLAGS = ("-m", "--multirun", "--run", "-r", "--resolve")


def flags_first(argv: list[str]) -> list[str]:
    """The command line with Hydra's bare flags before the overrides, as its parser reads it;
    ``python -m ttt_research debug=tiny -m seed=0,1`` then sweeps, as it says."""
    return [a for a in argv if a in BARE_FLAGS] + [a for a in argv if a not in BARE_FLAGS]


def check_flags(argv: list[str]) -> None:
    """Hydra's own parser over ``argv``, its refusal (an unknown flag, a flag without its value)
    one ``error:`` line and exit 2, not its usage text with the whole command line echoed."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()

    def refuse(message: str) -> None:
        print(f"error: {clipped(message)} (python -m ttt_research --help lists the options)", file=sys.stderr)
        sys.exit(2)

    parser.error = refuse  # argparse's way to report: usage lines, then exit 2
    parser.parse_args(argv)


def overrides(argv: list[str]) -> list[str]:
    """The overrides on a command line (words with ``=`` that are not flags)."""
    return [a for a in argv if "=" in a and not a.startswith("-")]


def one_line(error: BaseException, given: list[str] = ()) -> str | None:
    """Hydra's error as one line, or None when it is not one of reading the command line
    and composing the config (then it is a bug, and keeps its traceback)."""
    from hydra.errors import (
        CompactHydraException,
        ConfigCompositionException,
        InstantiationException,
        MissingConfigException,
        OverrideParseException,
    )
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    if isinstance(error, MissingConfigException):
        return _missing(str(error), given)
    if isinstance(error, ConfigCompositionException) and isinstance(
            error.__cause__, (ConfigAttributeError, ConfigKeyError)):
        return _not_a_key(error.__cause__, given)
    if isinstance(error, OverrideParseException):
        return _unparsed(str(error))
    if isinstance(error, InstantiationException):
        return None  # raised in the job, building an object: a constructor's traceback matters
    if isinstance(error, CompactHydraException):
        return _plain(str(error), error.__cause__, given)
    if isinstance(error, ValueError) and str(error).startswith(HYDRA_VALUE_ERRORS):
        return _plain(str(error), None, given)  # Hydra raises these as bare ValueErrors
    if isinstance(error, OSError) and _making_the_run_folder(error):
        return _no_folder(error)
    return None


def _making_the_run_folder(error: OSError) -> bool:
    """Whether the error is Hydra's own ``mkdir`` of a run's folder (``hydra.run.dir``, a
    sweep's ``hydra.sweep.dir`` and its jobs'), raised before any job runs: the frame that
    called pathlib's is Hydra's (an ``OSError`` of the job has the job's frames there)."""
    tb, caller = error.__traceback__, ""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name.endswith("pathlib.py") and f"{os.sep}hydra{os.sep}" in caller:
            return True
        caller, tb = name, tb.tb_next
    return False


def _no_folder(error: OSError) -> str:
    """hydra.run.dir names a file, or a folder below a file, or where nothing can be made."""
    why = {errno.EEXIST: "a file is there, not a folder", errno.ENOTDIR: "a part of the path is a file"}
    reason = why.get(error.errno) or describe_os_error(error)
    return (f"cannot make the run folder {error.filename}: {reason}; choose another hydra.run.dir "
            "(hydra.sweep.dir with -m)")


# --------------------------------------------------------------------------- the cases


def _lines(message: str) -> list[str]:
    """The message's lines up to Hydra's "Config search path:" listing, stripped, a long word
    (an override of thousands of values, which Hydra repeats) ``clipped``."""
    out = []
    for line in message.splitlines():
        if line.startswith("Config search path"):
            break
        if line.strip():
            out.append(" ".join(clipped(word) for word in line.strip().split(" ")))
    return out


def _plain(message: str, cause: BaseException | None, given: list[str] = ()) -> str:
    if message.startswith("Ambiguous value for argument"):  # net=mlp25,mlp100 without -m
        arg = re.search(r"argument '([^']*)'", message)
        sweep = clipped(arg.group(1)) if arg else "a value with commas"
        return (f"{sweep} is a sweep: add -m to run one job per value (for a list write key=[a,b]; "
                "for a string with commas quote it: key='a,b')")
    there = re.search(r"An item is already at '([^']+)'", message)  # +seed=3
    if there:
        key = there.group(1)
        value = _override_for(key, given)
        return f"{key} is in the config already: set it without the + ({key}={value or '...'})"
    chosen = re.match(r"Multiple values for (\S+)\. To override a value use 'override \S+ (\S+)'", message)
    if chosen:  # +net=mlp25: the group has a default option already
        return (f"{chosen.group(1)} has a default option already: choose another without the + "
                f"({chosen.group(1)}={chosen.group(2)})")
    text = " ".join(_lines(message))
    if cause is not None and str(cause).strip():
        text += f" ({str(cause).splitlines()[0].strip()})"
    return text


def _override_for(key: str, given: list[str]) -> str | None:
    """The value given to ``key`` on the command line, as typed (``clipped`` when long)."""
    for o in given:
        k, _, v = o.partition("=")
        if k.lstrip("+~") == key:
            return clipped(v)
    return None


def _missing(message: str, given: list[str]) -> str:
    """An option of a config group that is not there: a typo, or a plugin not installed."""
    found = re.search(r"Could not (?:find|load) '([^']+)'", message)
    if not found:
        return " ".join(_lines(message))
    path = found.group(1)
    group, _, option = path.rpartition("/")
    where = re.match(r"In '([^']+)'", message)
    where = where.group(1) if where else "config"
    plugin = PLUGINS.get((group, option))
    if plugin:
        package, extra = plugin
        asked = OURS_ON_PLUGINS.get(where, f"{group}={option}")
        if group == "hydra/sweeper":
            presets = [o for o in given if o.lstrip("+").startswith("hparams_search=")]
            asked += f" (asked for by {presets[0].lstrip('+')})" if presets else ""
        install = (f"pip install 'ttt_research[{extra}]'" if extra
                   else f"pip install {package} (not one of this project's extras)")
        return f"{asked} needs the Hydra plugin {package}, which is not installed: {install}"
    options = re.search(rf"Available options in '{re.escape(group)}':\n((?:\t.*\n?)*)", message)
    choices = options.group(1).split() if options else []
    line = f"{group}={option}: {group} has no option {option or '(empty)'}"
    if where not in ("config", "hydra/config"):  # a preset's defaults list names it
        line += f" (named in {where})"
    if choices:
        line += f"; choose one of {', '.join(choices)}"
    if group in ("hydra/launcher", "hydra/sweeper"):
        line += " (a launcher or sweeper of another Hydra plugin is listed once it is installed)"
    return line


def _not_a_key(cause, given: list[str]) -> str:
    """An override of a key the config does not have: a typo, or a key to add with ``+``."""
    from omegaconf import DictConfig

    full = str(getattr(cause, "full_key", None) or getattr(cause, "key", "") or "?")
    leaf = full.rsplit(".", 1)[-1]
    parent = full.rpartition(".")[0]
    node = getattr(cause, "parent_node", None)
    keys = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []
    value = _override_for(full, given)
    shown = f"={value}" if value is not None else "=..."
    if "/" in full:  # group/option syntax for a group that does not exist
        return f"{full} is not a config group (python -m ttt_research --help lists them)"
    if parent in ("hydra.launcher", "hydra.sweeper"):  # a setting of a plugin not chosen
        kind = parent.split(".")[1]
        chosen = re.sub(r"(Launcher|Sweeper)?Conf$", "", type_name(cause)).lower() or "the default"
        return (f"{full}: the {kind} chosen ({chosen}) has no setting {leaf}; choose the {kind} "
                f"that has it first, e.g. hydra/{kind}={'joblib' if kind == 'launcher' else 'optuna'}")
    keys = [k for k in keys if k != "_target_"]
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    if target and _takes(str(target), leaf):
        # The object built from this node takes the key: adding it is what they meant.
        return (f"{full} is not in the config, but {target} takes {leaf}: "
                f"add it with +{full}{shown}")
    close = difflib.get_close_matches(leaf, keys, n=1, cutoff=0.6)
    line = f"{full} is not a key of the config"
    if close:
        return f"{line}; did you mean {parent + '.' if parent else ''}{close[0]}{shown}?"
    if parent and 0 < len(keys) <= 16:
        return f"{line}; {parent} has {', '.join(keys)}"
    return f"{line} (python -m ttt_research --cfg job prints every key)"


def type_name(cause) -> str:
    """The name of the structured config a key was looked for in (``BasicLauncherConf``)."""
    kind = getattr(cause, "object_type", None)
    return getattr(kind, "__name__", "") if kind is not None else ""


def _takes(target: str, name: str) -> bool:
    """Whether the callable ``target`` (a dotted path) takes a keyword argument ``name``."""
    import inspect

    try:
        from hydra.utils import get_object

        params = inspect.signature(get_object(target)).parameters
    except Exception:  # not importable here, or no signature: do not guess
        return False
    p = params.get(name)
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def _unparsed(message: str) -> str:
    lines = [ln for ln in _lines(message) if not ln.startswith("See https")]
    which = re.match(r"Error parsing override '([^']*)'", lines[0]) if lines else None
    if which:
        detail = "; ".join(lines[1:])
        if "missing EQUAL" in detail:
            return f"{which.group(1)}: an override is key=value (or group=option)"
        return f"cannot read the override {which.group(1)}: {detail} ({GRAMMAR})"
    return f"cannot read an override: {'; '.join(lines)} ({GRAMMAR})"
